"""Captions describe the tables they caption: a caption that lists its table's rows names every row the chapter's
code gives that table (Table 4.1 once described 2 rows of a 4-row table)."""

from __future__ import annotations

import jupytext
import numpy as np
import pandas as pd
import pytest

from llmaudit.chapters.validity.projection import projection_fits
from llmaudit.paths import BOOK
from llmaudit.report.markdown import items


def caption_text(page: str, label: str) -> str:
    """The markdown cell of a book page that holds the caption labelled `label`."""
    cells = [cell.source for cell in jupytext.read(BOOK / page).cells if cell.cell_type == "markdown"]
    found = [source for source in cells if any(item.label == label for item in items(source))]
    assert len(found) == 1, label
    return " ".join(found[0].split()).lower()


def names_correlation_rows() -> list[str]:
    """The row labels of the validity chapter's name-correlation table, from `projection_fits` on names that fill
    every subset, each up to its parenthesis ("mixed (0.1 <= p_f < 0.9)" -> "mixed")."""
    p_f = np.linspace(0.0, 1.0, 24)
    names = pd.DataFrame({"p_f": p_f, "projection": p_f + np.sin(np.arange(24))})
    return [label.split(" (")[0] for label in projection_fits(names, names.iloc[::2])]


@pytest.mark.parametrize(("page", "label", "rows"), [
    ("04_validity.md", "tab-validity-names-correlation", names_correlation_rows),
])
def test_caption_names_every_row_of_its_table(page: str, label: str, rows) -> None:
    labels = rows()
    assert len(labels) == 4  # the table's shape: all, clearly gendered, mixed, the figure's sample
    text = caption_text(page, label)
    assert [row for row in labels if row.lower() not in text] == []
