"""Why a table's number is missing, said where the table is printed: a frame carries the reason for its missing cells
(`explain`, in `frame.attrs`), and every renderer (the book's tables, hence the report's, which embeds them) prints
each missing cell as the em dash followed by a footnote mark, and each reason once, in a sentence under the table. A
mark is plain text, so it survives printing, copying and a screen reader; a table with nothing missing stays plain."""

from __future__ import annotations

import html
from collections.abc import Hashable, Mapping
from typing import TypeAlias

import pandas as pd

from llmaudit.formats import MISSING

WHY = "why missing"  # the frame's attrs key: a str (every missing cell), a dict by column, a Series by row, or a frame
UNEXPLAINED = "no reason was recorded for this missing value"  # what a table says where its code gave none: a bug
SUPERSCRIPT = str.maketrans("0123456789", "⁰¹²³⁴⁵⁶⁷⁸⁹")  # a mark is the reason's number, raised
Why: TypeAlias = "str | Mapping[Hashable, str] | pd.Series | pd.DataFrame"


def explain(frame: pd.DataFrame, why: Why) -> pd.DataFrame:
    """`frame` carrying why its missing cells are missing: one reason for all (a str), one per column (a dict), one
    per row (a Series on the frame's index) or one per cell (a frame of reasons on its index and columns). Call it
    on the table as displayed: a reason by row or cell does not follow a reshaped frame."""
    shown = frame.copy()
    shown.attrs[WHY] = why
    return shown


def _reason(why: object, row: Hashable, column: Hashable) -> str:
    """The reason `why` gives for the cell (row, column); `UNEXPLAINED` where it gives none."""
    if isinstance(why, str):
        return why
    found: object = None
    if isinstance(why, pd.DataFrame) and row in why.index and column in why.columns:
        found = why.at[row, column]
    elif isinstance(why, pd.Series) and row in why.index:
        found = why.at[row]
    elif isinstance(why, Mapping):
        found = why.get(column)
    return found if isinstance(found, str) and found else UNEXPLAINED


class Marks:
    """The reasons one table gives for its missing cells, each with its mark (¹, ² ... in order of first use): every
    table that prints a missing number, a frame's (`footnoted`) or a page's own, marks it through one of these."""

    def __init__(self) -> None:
        self.reasons: dict[str, str] = {}

    def missing(self, reason: str) -> str:
        """The em dash followed by `reason`'s mark."""
        mark = self.reasons.setdefault(reason, str(len(self.reasons) + 1).translate(SUPERSCRIPT))
        return f"{MISSING}{mark}"

    def text(self) -> str:
        """The reasons as plain lines under a text table: '¹ — reason.' ('' when nothing is missing)."""
        return "".join(f"\n{mark} {MISSING} {reason}." for reason, mark in self.reasons.items())

    def html(self) -> str:
        """The reasons as a list under an HTML table ('' when nothing is missing)."""
        lines = "".join(f"<li>{mark} {MISSING} {html.escape(reason)}.</li>" for reason, mark in self.reasons.items())
        return f'<ul class="why-missing" aria-label="why a value is missing">{lines}</ul>' if lines else ""


def footnoted(frame: pd.DataFrame) -> tuple[pd.DataFrame, Marks]:
    """`frame` with each missing cell as the em dash and its reason's mark (other cells as they were), and the
    marks with their reasons, to print under it."""
    marks = Marks()
    absent = frame.isna().to_numpy()
    if not absent.any():
        return frame, marks
    why = frame.attrs.get(WHY)
    shown = frame.astype(object)
    for row_at, column_at in zip(*absent.nonzero()):
        shown.iat[row_at, column_at] = marks.missing(_reason(why, frame.index[row_at], frame.columns[column_at]))
    shown.attrs = {}
    return shown, marks
