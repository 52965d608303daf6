"""Notebook tables as the report prints them: a missing value is an em dash with its reason's mark (never NaN, nan,
None or <NA>; a table the chapter did not print through `chapters.display` carries no reason, and says so under it)
and a pandas default index (a first column 0, 1, 2 ... under an empty head, which labels nothing) is left out."""

from __future__ import annotations

import re

from llmaudit.footnotes import UNEXPLAINED, Marks

_MISSING_CELL = re.compile(r"(<td[^>]*>)\s*(?:NaN|nan|None|&lt;NA&gt;|<NA>|NaT)\s*(</td>)")
_TABLE = re.compile(r"<table\b.*?</table>", re.S)
_BODY_INDEX = re.compile(r"(<tr[^>]*>\s*)<th[^>]*>(\d+)</th>")
_HEAD_BLANK = re.compile(r"(<tr[^>]*>\s*)<th[^>]*>\s*</th>")


def _without_range_index(table: str) -> str:
    """The table without its first column where that is a default index: body rows headed 0, 1, 2 ... in order, and
    one head row whose first cell is empty."""
    head, _, body = table.partition("<tbody>")
    numbers = [int(found[1]) for found in _BODY_INDEX.findall(body)]
    rows = body.count("<tr")
    if not rows or numbers != list(range(rows)) or head.count("<tr") != 1 or not _HEAD_BLANK.search(head):
        return table
    return _HEAD_BLANK.sub(r"\1", head, count=1) + "<tbody>" + _BODY_INDEX.sub(r"\1", body)


def _marked(table: str) -> str:
    """The table with each missing cell as the em dash and the mark of `UNEXPLAINED`, said under it."""
    marks = Marks()
    table = _MISSING_CELL.sub(lambda m: f"{m[1]}{marks.missing(UNEXPLAINED)}{m[2]}", table)
    return _without_range_index(table) + marks.html()


def tidy(html: str) -> str:
    """`html` (a notebook's table output) with missing values marked (`_marked`) and default indexes left out."""
    return _TABLE.sub(lambda m: _marked(m[0]), html)
