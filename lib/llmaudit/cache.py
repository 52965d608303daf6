"""Content-addressed caches: the user cache (converted weights, data downloads) and per-audit tensor results,
so an interrupted audit resumes without recomputing any forward pass it already saved."""

from __future__ import annotations

import functools
import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file


def cache_root() -> Path:
    """User cache for converted weights and data downloads: $LLMAUDIT_CACHE or ~/.cache/llmaudit."""
    return Path(os.environ.get("LLMAUDIT_CACHE") or Path.home() / ".cache" / "llmaudit").expanduser()


# Modules whose code decides what a forward pass computes: prompts, data, models, steering. A change to any of them
# invalidates every cached forward pass; reporting and statistics run on the cached tensors and are left out.
COMPUTING = ("data", "framing", "markedness", "models", "similarity", "steering", "tasks", "validity")


@functools.cache
def code_version() -> str:
    """Hash of the package's computing modules, part of every cache key so that changed code never reuses results."""
    package = Path(__file__).parent
    h = hashlib.sha256()
    for folder in COMPUTING:
        for path in sorted((package / folder).rglob("*.py")) + sorted((package / folder).rglob("*.json")):
            h.update(path.relative_to(package).as_posix().encode() + b"\0" + path.read_bytes())
    return h.hexdigest()[:16]


def digest(key: Any) -> str:
    """Stable short hash of a JSON-serialisable key (texts, token ids, layers, weights sha...)."""
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:24]


def cached_tensors(
    folder: Path | None, key: Any, compute: Callable[[], dict[str, torch.Tensor]]
) -> dict[str, torch.Tensor]:
    """Return `compute()`, stored under `folder` by the digest of `key` and the code version; a later call with the
    same key and code reads the file instead. No folder: no caching. Files are written whole (temp + rename)."""
    if folder is None:
        return compute()
    path = Path(folder) / f"{digest({'code': code_version(), 'key': key})}.safetensors"
    if path.exists():
        return load_file(path)
    tensors = compute()
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".partial")
    save_file({name: t.contiguous() for name, t in tensors.items()}, partial)
    partial.rename(path)
    return tensors
