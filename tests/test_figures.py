"""Every figure caption has its chart: in every chapter source the cell above a caption ends with its
show(...) call, and the report refuses an executed chapter whose caption has no chart above it."""

from __future__ import annotations

from pathlib import Path

import jupytext
import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from llmaudit.errors import AuditError
from llmaudit.paths import BOOK
from llmaudit.report import build_report
from llmaudit.report.audited import read_audited
from llmaudit.report.figures import undrawn_figures, unshown_figures

SOURCES = sorted(BOOK.glob("[0-9][0-9]_*.md"))
def caption(label: str, text: str) -> str:
    """A figure's caption as the chapters write it."""
    return f"```{{figure-caption}}\n:name: {label}\n\n{text}\n```"


SVG = {"image/svg+xml": "<svg xmlns='http://www.w3.org/2000/svg'><rect width='1' height='1'/></svg>"}


@pytest.mark.parametrize("source", SOURCES, ids=[path.stem for path in SOURCES])
def test_every_figure_caption_sits_under_a_cell_ending_with_show(source: Path) -> None:
    assert unshown_figures(jupytext.read(source)) == []


def test_source_check_catches_a_show_in_the_middle_of_a_cell() -> None:
    nb = new_notebook(cells=[
        new_code_cell("x = 1\nshow(chart(x))\ntable"), new_markdown_cell(caption("fig-a", "A chart.")),
        new_code_cell("show(chart(2))"),
        new_markdown_cell(caption("fig-b", "Another.") + "\n\n" + caption("fig-c", "No chart.")),
        new_markdown_cell(caption("fig-d", "Under prose.")),
    ])
    assert unshown_figures(nb) == [
        "figure fig-a: the cell above its caption does not draw a chart",
        "figure fig-c: its caption does not open a markdown cell, so no chart stands above it",
        "figure fig-d: no code cell above its caption",
    ]


def executed(chart: bool, tags: list[str] | None = None) -> nbformat.NotebookNode:
    """A one-figure chapter whose chart cell shows an SVG or only a table."""
    data = SVG if chart else {"text/plain": "a table"}
    cell = new_code_cell("show(chart)", metadata={"tags": tags or []},
                         outputs=[new_output("execute_result", data=data, execution_count=1)])
    return new_notebook(cells=[new_markdown_cell("# Chapter 1"), cell,
                               new_markdown_cell(caption("fig-chart", "Chart."))])


def test_executed_check_needs_a_shown_chart_output() -> None:
    assert undrawn_figures(executed(chart=True)) == []
    undrawn = "figure fig-chart: the cell above its caption does not draw a chart"
    assert undrawn_figures(executed(chart=False)) == [undrawn]
    assert undrawn_figures(executed(chart=True, tags=["remove-output"])) != []


def test_report_refuses_a_caption_without_its_figure(tmp_path: Path) -> None:
    good, bad = tmp_path / "01_good.ipynb", tmp_path / "02_bad.ipynb"
    nbformat.write(executed(chart=True), good)
    nbformat.write(executed(chart=False), bad)
    assert build_report(read_audited(tmp_path), "Audit", [good]).is_file()
    with pytest.raises(AuditError, match=r"02_bad.ipynb: figure fig-chart: the cell above its caption does not draw"):
        build_report(read_audited(tmp_path), "Audit", [good, bad])
