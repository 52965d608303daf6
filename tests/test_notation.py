"""One notation across the book: the glossary's notation table gives each quantity (margin, gap, sensitivity,
concept score, Sobol' index, steering coefficient) its own symbol, and no chapter writes another glyph for the margin
or the sensitivity's S for the Sobol' index (the chapters once used epsilon for the margin and for a noise term, and
S for both sensitivity and Sobol' index)."""

from __future__ import annotations

import re

import pytest

from llmaudit.paths import BOOK

PAGES = sorted(BOOK.glob("*.md"))
ROW = re.compile(r"^\| (?P<quantity>[^|]+) \| (?P<symbol>\$[^|]+\$) \| [^|]+ \| [^|]+ \|$", re.M)
PAPER_S_I = "the main paper's $S_i$"  # where the book names the paper's own symbol for the Sobol' index


def notation() -> dict[str, str]:
    """The glossary's notation table: quantity -> symbol."""
    text = (BOOK / "glossary.md").read_text(encoding="utf-8")
    return {row["quantity"]: row["symbol"] for row in ROW.finditer(text.split("(notation)=", 1)[1])}


def test_notation_table_gives_each_quantity_its_own_symbol() -> None:
    table = notation()
    wanted = ("concept score", "gap", "sensitivity", "equivalence margin", "Sobol' index", "steering coefficient")
    assert all(any(word in quantity for quantity in table) for word in wanted), sorted(table)
    assert len(set(table.values())) == len(table)


@pytest.mark.parametrize("page", PAGES, ids=[page.stem for page in PAGES])
def test_pages_write_the_tables_symbols(page) -> None:
    text = page.read_text(encoding="utf-8")
    assert "\\varepsilon" not in text and "ε" not in text  # the margin is \epsilon only
    assert "$S_i" not in text.replace(PAPER_S_I, "") and "\\hat S_i" not in text  # the Sobol' index is Sob_i
