"""Where the project's own files are, and the rule for a name that becomes a folder under reports/."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PARAMS_DIR = REPO / "params"
BOOK = REPO / "book"
PLAIN_NAME = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,99}")  # a folder under reports/, never a path


def plain_name(name: str) -> str:
    """`name` if it can only be one folder under reports/ (never a path out of it), else ValueError."""
    if not PLAIN_NAME.fullmatch(name):
        raise ValueError(f"use up to 100 letters, digits and ._- only, not starting with a dot (got {name!r})")
    return name
