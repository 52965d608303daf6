"""Content-addressed caches: the user cache (converted weights, data downloads) and per-audit tensor results,
so an interrupted audit resumes without recomputing any forward pass it already saved."""

from __future__ import annotations

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


def digest(key: Any) -> str:
    """Stable short hash of a JSON-serialisable key (texts, token ids, layers, weights sha...)."""
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:24]


def cached_tensors(
    folder: Path | None, key: Any, compute: Callable[[], dict[str, torch.Tensor]]
) -> dict[str, torch.Tensor]:
    """Return `compute()`, stored under `folder` by the digest of `key`; a later call with the same key reads
    the file instead. No folder: no caching. Files are written whole (temp + rename), never half."""
    if folder is None:
        return compute()
    path = Path(folder) / f"{digest(key)}.safetensors"
    if path.exists():
        return load_file(path)
    tensors = compute()
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".partial")
    save_file({name: t.contiguous() for name, t in tensors.items()}, partial)
    partial.rename(path)
    return tensors
