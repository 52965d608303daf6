"""Text from files (report folders, params, case files, model output) made safe to print on a terminal: control
characters, line breaks and bidirectional overrides shown as escapes, so that no string can move the cursor, recolour
or clear the screen, reorder what is shown or add a line."""

from __future__ import annotations

import unicodedata

_BIDI = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def _unsafe(char: str) -> bool:
    """A C0/C1 control, DEL, a Unicode line or paragraph separator, or a bidirectional control."""
    return unicodedata.category(char) in {"Cc", "Zl", "Zp"} or char in _BIDI


def printable(text: object) -> str:
    """`text` with every unsafe character written as its Python escape (newline as \\n, ESC as \\x1b)."""
    return "".join(char.encode("unicode_escape").decode("ascii") if _unsafe(char) else char for char in str(text))


QUOTED = 200  # characters of an input (a path, a name, a setting) an error line quotes at most


def clipped(text: object, limit: int = QUOTED) -> str:
    """`text` cut to `limit` characters, saying how long it was, for an error line that quotes an input: an argument
    of a megabyte is quoted by its start."""
    text = str(text)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"
