"""Content-addressed caches: the user cache (converted weights, data downloads) and per-audit tensor results,
so an interrupted audit resumes without recomputing any forward pass it already saved. A tensor cache folder is
named by the hash of the code that computes into it (`code_version`), so changed code never reuses a result."""

from __future__ import annotations

import functools
import hashlib
import json
import os
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from llmaudit.sealed import Unsealed, seal, unseal


def cache_root() -> Path:
    """User cache for converted weights and data downloads: $LLMAUDIT_CACHE or ~/.cache/llmaudit."""
    return Path(os.environ.get("LLMAUDIT_CACHE") or Path.home() / ".cache" / "llmaudit").expanduser()


FIGURES = "plots.py"  # a chapter's figures, drawn from its cached results: left out of its code hash
ENTRIES = ("cache.py", "sealed.py")  # the code that writes and reads an entry: in every code hash, so that entries of
# an older format lie in another folder and are never read


@functools.cache
def code_version(packages: tuple[str, ...]) -> str:
    """Hash of the sources (.py and .json) of the named llmaudit packages (dotted from llmaudit down, e.g.
    'chapters.decision_tasks'): the chapters declare which packages decide their forward passes
    (`llmaudit.registry.computing_packages`); reporting, figures and statistics, which run on the cached tensors, are
    left out. The entry format's code (`ENTRIES`) is hashed too."""
    root = Path(__file__).parent
    h = hashlib.sha256(b"".join(root.joinpath(name).read_bytes() for name in ENTRIES))
    for name in sorted(packages):
        folder = root.joinpath(*name.split("."))
        for path in sorted(folder.rglob("*.py")) + sorted(folder.rglob("*.json")):
            if path.name != FIGURES:
                h.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes())
    return h.hexdigest()[:16]


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


def cached_tensors(
    folder: Path | None, key: Any, compute: Callable[[], dict[str, torch.Tensor]]
) -> dict[str, torch.Tensor]:
    """Return `compute()`, stored under `folder` by the digest of `key` with the tensors' checksum; a later call with
    the same key reads the file instead, unless it fails the checksum. No folder: no caching. Files are written whole
    (temp + rename)."""
    if folder is None:
        return compute()
    found = stored_tensors(folder, key)
    if found is not None:
        return found
    tensors = compute()
    store_tensors(folder, key, tensors)
    return tensors


def stored_tensors(folder: Path | None, key: Any) -> dict[str, torch.Tensor] | None:
    """The tensors stored under `key` (`store_tensors`), or None where there are none, they fail their checksum or
    they are another key's."""
    path = Path(folder) / f"{digest(key)}.safetensors" if folder is not None else None
    return _verified(path, key) if path is not None and path.exists() else None


def store_tensors(folder: Path | None, key: Any, tensors: dict[str, torch.Tensor]) -> None:
    """Store `tensors` under `folder` by the digest of `key`, with that digest and their checksum
    (`llmaudit.sealed`), written whole (temp + rename)."""
    if folder is None:
        return
    path = Path(folder) / f"{digest(key)}.safetensors"
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".partial")
    partial.write_bytes(seal(tensors, {"key": digest(key)}))
    partial.rename(path)
