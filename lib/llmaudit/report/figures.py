"""Every promised figure is drawn: a figure's caption (a {figure-caption} directive) opens a markdown cell right
under the code cell that draws its chart. Checked on a chapter's source (the cell ends with a `show(...)` call, whose
value the notebook displays) and on its executed notebook (the cell's shown outputs hold a chart), so that a
`show(...)` left in the middle of a cell, whose output Jupyter drops, fails before a reader meets a caption without
its figure."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

import nbformat

from llmaudit.report import markdown

CHART_MIMES = ("image/svg+xml", "image/png", "image/jpeg")
_VEGALITE = re.compile(r"application/vnd\.vegalite\.v\d+\+json")
SHOWN_BY = "show"  # llmaudit.report.show: a chart as the SVG figure a cell displays


def captions(nb: nbformat.NotebookNode) -> Iterator[tuple[str, nbformat.NotebookNode | None, bool]]:
    """Each figure caption of the notebook's markdown: its label, the code cell just above its markdown cell (None
    where a markdown cell or nothing is), and whether the caption opens its cell (a caption further down a cell has
    prose, not its chart, above it)."""
    above = None
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            for item in markdown.items(cell.source):
                if item.kind == "figure":
                    yield item.label, above, item.opens
        above = cell if cell.cell_type == "code" else None


def _ends_with_show(source: str) -> bool:
    """Whether the code's last statement is a bare `show(...)` call, whose value the notebook displays."""
    try:
        body = ast.parse(source).body
    except SyntaxError:
        return False
    last = body[-1] if body else None
    return (isinstance(last, ast.Expr) and isinstance(last.value, ast.Call)
            and isinstance(last.value.func, ast.Name) and last.value.func.id == SHOWN_BY)


def _draws(cell: nbformat.NotebookNode) -> bool:
    """Whether an executed code cell shows a chart in the report (an SVG or image output, not removed by a tag)."""
    if {"remove-cell", "remove-output"} & set(cell.metadata.get("tags", [])):
        return False
    return any(
        mime in CHART_MIMES or _VEGALITE.fullmatch(mime)
        for out in cell.get("outputs", [])
        for mime in out.get("data", {})
    )


def _problems(nb: nbformat.NotebookNode, draws) -> list[str]:
    """The captions of `nb` whose cell above does not satisfy `draws`, each as one line."""
    found = []
    for label, cell, opens in captions(nb):
        if not opens:
            found.append(f"figure {label}: its caption does not open a markdown cell, so no chart stands above it")
        elif cell is None:
            found.append(f"figure {label}: no code cell above its caption")
        elif not draws(cell):
            found.append(f"figure {label}: the cell above its caption does not draw a chart")
    return found


def unshown_figures(source: nbformat.NotebookNode) -> list[str]:
    """A chapter source's figure captions whose code cell above does not end with a `show(...)` call."""
    return _problems(source, lambda cell: _ends_with_show(cell.source))


def undrawn_figures(executed: nbformat.NotebookNode) -> list[str]:
    """An executed chapter's figure captions with no chart output in the code cell above them."""
    return _problems(executed, _draws)
