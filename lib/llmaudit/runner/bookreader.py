"""How the book reads an executed chapter notebook (myst-nb's `nb_custom_formats` reader for .ipynb, set in
_config.yml): every code cell's source is folded behind a toggle unless its tags already hide or remove it, so a
page reads as prose and results; the notebook file itself, which nbval compares, is left as the audit wrote it."""

from __future__ import annotations

import nbformat

from llmaudit.captions import SOLUTION_TAG

FOLD = "hide-input"  # myst-nb's tag: the source behind a "Show code cell source" toggle, the outputs shown
# Tags that already decide how the source shows: folded with or without its outputs, left out, or a solution's.
DECIDED = frozenset({"hide-input", "hide-cell", "remove-input", "remove_input", "remove-cell", SOLUTION_TAG})


def fold_code(notebook: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """The notebook with the `hide-input` tag on each code cell whose tags do not already say how it shows."""
    for cell in notebook.cells:
        if cell.cell_type == "code" and not DECIDED & set(cell.metadata.get("tags", [])):
            cell.metadata["tags"] = [*cell.metadata.get("tags", []), FOLD]
    return notebook


def read(text: str) -> nbformat.NotebookNode:
    """Read a .ipynb notebook's text as myst-nb's default reader does, with its code folded."""
    return fold_code(nbformat.reads(text, as_version=4))
