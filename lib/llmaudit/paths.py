"""Where the project's own files are, and the rule for a name that becomes a folder under reports/."""

from __future__ import annotations

import re
from pathlib import Path

from llmaudit.terminal import clipped

REPO = Path(__file__).resolve().parents[2]
PARAMS_DIR = REPO / "params"
BOOK = REPO / "book"
PLAIN_NAME = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,99}")  # a folder under reports/, never a path


RESERVED = frozenset({"index", "compare"})  # reports/index.md, index.html and compare/ sit beside the model folders


def plain_name(name: str) -> str:
    """`name` if it can only be one folder under reports/ (never a path out of it, nor one of the files beside the
    model folders), else ValueError."""
    if not PLAIN_NAME.fullmatch(name):
        raise ValueError("use up to 100 letters, digits and ._- only, not starting with a dot "
                         f"(got {clipped(repr(name))})")
    if name.split(".")[0].lower() in RESERVED:
        raise ValueError(f"{name!r} would collide with reports/index.* or reports/compare/: choose another name")
    return name
