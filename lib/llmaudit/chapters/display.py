"""How a chapter's tables print in the book: numbers in the chapter's one format and a missing number as the em dash
the report prints (`formats.MISSING`), never NaN, with a footnote mark whose reason is listed under the table
(`footnotes`: the reason the frame carries), so the book and the report show a missing number one way."""

from __future__ import annotations

import pandas as pd
from IPython import get_ipython

from llmaudit.footnotes import footnoted
from llmaudit.formats import MISSING


def _sizes() -> dict[str, object]:
    """The display options pandas' own table repr reads: how many rows and columns it shows."""
    return {"max_rows": pd.get_option("display.max_rows"), "max_cols": pd.get_option("display.max_columns"),
            "show_dimensions": pd.get_option("display.show_dimensions")}


def html(frame: pd.DataFrame) -> str:
    """The table as the notebook shows it, a missing number as an em dash and its reason's mark, reasons under it."""
    shown, marks = footnoted(frame)
    return shown.to_html(na_rep=MISSING, notebook=True, **_sizes()) + marks.html()


def text(frame: pd.DataFrame, printer: object = None, cycle: bool = False) -> str:
    """The table as plain text (what a text-only reader and the regression references see), missing as an em dash
    and its reason's mark, the reasons under it."""
    table, marks = footnoted(frame)
    shown = table.to_string(na_rep=MISSING, line_width=pd.get_option("display.width"),
                            min_rows=pd.get_option("display.min_rows"), **_sizes()) + marks.text()
    if printer is not None:
        printer.text(shown)  # type: ignore[attr-defined]
    return shown


def book_tables(float_format: str) -> None:
    """Print every float with `float_format` (e.g. '{:+.4f}') and every missing number as an em dash in this
    notebook's tables (a no-op outside IPython, where nothing displays tables)."""
    pd.set_option("display.float_format", float_format.format)
    shell = get_ipython()
    if shell is not None:
        formatters = shell.display_formatter.formatters
        formatters["text/html"].for_type(pd.DataFrame, html)
        formatters["text/plain"].for_type(pd.DataFrame, text)
