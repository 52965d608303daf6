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
from safetensors import SafetensorError, safe_open
from safetensors.torch import save_file


def cache_root() -> Path:
    """User cache for converted weights and data downloads: $LLMAUDIT_CACHE or ~/.cache/llmaudit."""
    return Path(os.environ.get("LLMAUDIT_CACHE") or Path.home() / ".cache" / "llmaudit").expanduser()


FIGURES = "plots.py"  # a chapter's figures, drawn from its cached results: left out of its code hash


@functools.cache
def code_version(packages: tuple[str, ...]) -> str:
    """Hash of the sources (.py and .json) of the named llmaudit packages (dotted from llmaudit down, e.g.
    'chapters.decision_tasks'): the chapters declare which packages decide their forward passes
    (`llmaudit.registry.computing_packages`); reporting, figures and statistics, which run on the cached tensors, are
    left out."""
    root = Path(__file__).parent
    h = hashlib.sha256()
    for name in sorted(packages):
        folder = root.joinpath(*name.split("."))
        for path in sorted(folder.rglob("*.py")) + sorted(folder.rglob("*.json")):
            if path.name != FIGURES:
                h.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes())
    return h.hexdigest()[:16]


def digest(key: Any) -> str:
    """Stable short hash of a JSON-serialisable key (texts, token ids, layers, weights sha...)."""
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:24]


def tensors_sha256(tensors: dict[str, torch.Tensor], header: str = "") -> str:
    """sha256 over a header text and every tensor's name, dtype, shape and bytes, in name order: the checksum saved
    with cache entries and steering vectors, so that a damaged or altered file is never used."""
    h = hashlib.sha256(header.encode())
    for name in sorted(tensors):
        tensor = tensors[name].detach().cpu().contiguous()
        h.update(f"\0{name}\0{tensor.dtype}\0{list(tensor.shape)}\0".encode())
        data = tensor.reshape(-1).view(torch.uint8).numpy()
        h.update(data)  # type: ignore[arg-type]  # numpy declares ndarray's buffer protocol only for Python >= 3.12
    return h.hexdigest()


def _verified(path: Path) -> dict[str, torch.Tensor] | None:
    """A cache entry's tensors, or None, with a warning naming the file, where it is unreadable or fails its
    checksum (a truncated write, a damaged disk, an edit): the caller computes it again."""
    try:
        with safe_open(str(path), framework="pt") as handle:
            stored = (handle.metadata() or {}).get("sha256")
            tensors = {name: handle.get_tensor(name) for name in handle.keys()}
    except (OSError, SafetensorError) as err:
        problem = f"is unreadable ({' '.join(str(err).split())})"
    else:
        if stored == tensors_sha256(tensors):
            return tensors
        problem = "fails its checksum"
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
    """The tensors stored under `key` (`store_tensors`), or None where there are none or they fail their checksum."""
    path = Path(folder) / f"{digest(key)}.safetensors" if folder is not None else None
    return _verified(path) if path is not None and path.exists() else None


def store_tensors(folder: Path | None, key: Any, tensors: dict[str, torch.Tensor]) -> None:
    """Store `tensors` under `folder` by the digest of `key`, with their checksum, written whole (temp + rename)."""
    if folder is None:
        return
    path = Path(folder) / f"{digest(key)}.safetensors"
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".partial")
    checksum = {"sha256": tensors_sha256(tensors)}
    save_file({name: t.contiguous() for name, t in tensors.items()}, partial, metadata=checksum)
    partial.rename(path)
