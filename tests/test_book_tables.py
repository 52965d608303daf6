"""A missing number shows one way in the book and the report: an em dash, never NaN (the book printed `NaN` where
the report printed "—", issue 56 item 9)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from IPython.core.interactiveshell import InteractiveShell

from llmaudit.chapters.display import book_tables
from llmaudit.formats import MISSING
from llmaudit.paths import BOOK


@pytest.fixture
def shell():
    """A real IPython shell, as a chapter's kernel runs it; its display options restored afterwards."""
    with pd.option_context("display.float_format", None):
        yield InteractiveShell.instance()
    InteractiveShell.clear_instance()


def test_a_missing_number_prints_as_the_reports_dash_in_html_and_text(shell) -> None:
    book_tables("{:+.4f}")
    frame = pd.DataFrame({"value": [0.1234, np.nan], "cases": [6, 1]}, index=["pooled", "asian male"])
    shown, _ = shell.display_formatter.format(frame)
    for mime in ("text/html", "text/plain"):
        assert "NaN" not in shown[mime] and MISSING in shown[mime] and "+0.1234" in shown[mime]


def test_every_chapter_sets_its_tables_through_book_tables() -> None:
    for source in sorted(BOOK.glob("[0-9][0-9]_*.md")):
        text = source.read_text()
        assert "book_tables(" in text and '"display.float_format"' not in text, source.name
