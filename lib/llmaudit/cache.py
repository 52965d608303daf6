"""Content-addressed caches: the user cache (converted weights, data downloads) and per-audit tensor results,
so an interrupted audit resumes without recomputing any forward pass it already saved. A tensor cache folder is
named by the hash of the code that computes into it (`code_version`), so changed code never reuses a result, while
an edit that changes no code (a docstring, a comment, the layout) keeps every result."""

from __future__ import annotations

import ast
import functools
import hashlib
import json
import os
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from llmaudit.sealed import Unsealed, seal, unseal


def cache_root() -> Path:
    """User cache for converted weights and data downloads: $LLMAUDIT_CACHE or ~/.cache/llmaudit."""
    return Path(os.environ.get("LLMAUDIT_CACHE") or Path.home() / ".cache" / "llmaudit").expanduser()


PACKAGE = Path(__file__).parent  # the llmaudit package, whose code the hashes cover
FIGURES = "plots.py"  # a chapter's figures, drawn from its cached results: left out of its code hash
ENTRIES = ("cache.py", "sealed.py")  # the code that writes and reads an entry: in every code hash, so that entries of
# an older format lie in another folder and are never read


@dataclass(frozen=True)
class TensorCache:
    """Where a chapter's forward passes are cached: `folder`, where it stores and reads them, and `shared`, the folders
    of the chapters whose passes it repeats, where it reads them too (their code hashes cover only code that its own
    covers, `llmaudit.registry.cache_packages`)."""

    folder: Path
    shared: tuple[Path, ...] = ()


Cache = TensorCache | Path | None  # a bare folder is a cache of one folder; None: no caching


@functools.cache
def code_version(packages: tuple[str, ...]) -> str:
    """Hash of the code of the named llmaudit packages (dotted from llmaudit down, e.g. 'chapters.decision_tasks'):
    their modules' syntax trees without docstrings and their JSON files' data (`code`). The chapters declare which
    packages decide their forward passes (`llmaudit.registry.cache_packages`); reporting, figures and statistics,
    which run on the cached tensors, are left out. The entry format's code (`ENTRIES`) is hashed too."""
    h = hashlib.sha256(b"".join(code(PACKAGE / name) for name in ENTRIES))
    for name in sorted(set(packages)):
        folder = PACKAGE.joinpath(*name.split("."))
        for path in sorted(folder.rglob("*.py")) + sorted(folder.rglob("*.json")):
            if path.name != FIGURES:
                h.update(path.relative_to(PACKAGE).as_posix().encode() + b"\0" + code(path))
    return h.hexdigest()[:16]


def code(path: Path) -> bytes:
    """What of a source file decides what it computes: a module's syntax tree without its docstrings and other bare
    strings (`ast.dump`, which leaves out comments, layout and line numbers), or a JSON file's data."""
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".json":
        return json.dumps(json.loads(text)).encode()
    tree = ast.parse(text)
    for node in ast.walk(tree):
        for field in ("body", "orelse", "finalbody"):
            statements = getattr(node, field, None)
            if isinstance(statements, list):
                setattr(node, field, [s for s in statements if not _bare_string(s)])
    return ast.dump(tree).encode()


def _bare_string(statement: object) -> bool:
    """Whether a statement is a string and nothing else (a docstring): it computes nothing."""
    return (isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant)
            and isinstance(statement.value.value, str))


def digest(key: Any) -> str:
    """Stable short hash of a JSON-serialisable key (texts, token ids, layers, weights sha...)."""
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:24]


def _verified(path: Path, key: Any) -> dict[str, torch.Tensor] | None:
    """A cache entry's tensors, or None, with a warning naming the file, where it is unreadable, fails its checksum
    (a truncated write, a damaged disk, an edit) or holds the result of another key than the one its name stands for
    (an entry moved or copied onto another's name): the caller computes it again."""
    try:
        tensors, header = unseal(path)
    except Unsealed as err:
        problem = str(err)
    else:
        if header.get("key") == digest(key):
            return tensors
        problem = f"holds the result of another key ({str(header.get('key'))[:24]!r}, not {digest(key)!r})"
    warnings.warn(f"cache entry {path} {problem}: computing it again", stacklevel=3)
    return None


def cached_tensors(cache: Cache, key: Any, compute: Callable[[], dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    """Return `compute()`, stored in the cache's folder by the digest of `key` with the tensors' checksum; a later call
    with the same key reads the file instead (from the cache's folder or one it shares), unless it fails the
    checksum. No cache: no caching. Files are written whole (temp + rename)."""
    if cache is None:
        return compute()
    found = stored_tensors(cache, key)
    if found is not None:
        return found
    tensors = compute()
    store_tensors(cache, key, tensors)
    return tensors


def stored_tensors(cache: Cache, key: Any) -> dict[str, torch.Tensor] | None:
    """The tensors stored under `key` (`store_tensors`) in the cache's folder, else in the first folder it shares that
    holds them; None where none does, or its file fails its checksum or is another key's."""
    for folder in _folders(cache):
        path = folder / f"{digest(key)}.safetensors"
        found = _verified(path, key) if path.exists() else None
        if found is not None:
            return found
    return None


def store_tensors(cache: Cache, key: Any, tensors: dict[str, torch.Tensor]) -> None:
    """Store `tensors` in the cache's folder by the digest of `key`, with that digest and their checksum
    (`llmaudit.sealed`), written whole (temp + rename)."""
    folders = _folders(cache)
    if not folders:
        return
    path = folders[0] / f"{digest(key)}.safetensors"
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".partial")
    partial.write_bytes(seal(tensors, {"key": digest(key)}))
    partial.rename(path)


def _folders(cache: Cache) -> tuple[Path, ...]:
    """The folders a cache reads, its own (where it stores) first; none without a cache."""
    if cache is None:
        return ()
    if isinstance(cache, TensorCache):
        return (Path(cache.folder), *map(Path, cache.shared))
    return (Path(cache),)
