"""How the book reads an executed chapter notebook (myst-nb's `nb_custom_formats` reader for .ipynb, set in
_config.yml): every code cell's source is folded behind a toggle unless its tags already hide or remove it, so a
page reads as prose and results, and every chart gets its figure's caption as alt text (myst-nb would give it the
image file's path); the notebook file itself, which nbval compares, is left as the audit wrote it."""

from __future__ import annotations

import re

import nbformat

from llmaudit.captions import SOLUTION_TAG

FOLD = "hide-input"  # myst-nb's tag: the source behind a "Show code cell source" toggle, the outputs shown
# Tags that already decide how the source shows: folded with or without its outputs, left out, or a solution's.
DECIDED = frozenset({"hide-input", "hide-cell", "remove-input", "remove_input", "remove-cell", SOLUTION_TAG})
# A figure's caption, as the chapters write it right under its chart: the directive, its options, its text.
CAPTION = re.compile(r"^(`{3,})\{figure-caption\}[^\n]*\n(?::[\w-]+:[^\n]*\n)*(?P<text>.*?)^\1$", re.M | re.S)
ROLE = re.compile(r"\{[\w:-]+\}`(?P<text>[^`<]*?)\s*(?:<(?P<target>[^`>]*)>)?`")  # {numref}`Table %s <tab-x>`
SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")
ALT_SENTENCES = 2  # an alt text is the caption's first sentences: what the chart shows, not its whole reading


def fold_code(notebook: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """The notebook with the `hide-input` tag on each code cell whose tags do not already say how it shows."""
    for cell in notebook.cells:
        if cell.cell_type == "code" and not DECIDED & set(cell.metadata.get("tags", [])):
            cell.metadata["tags"] = [*cell.metadata.get("tags", []), FOLD]
    return notebook


def plain(markdown: str) -> str:
    """MyST text as plain words for an alt attribute: a role as its text without a number placeholder (else its
    target), no emphasis, code or math marks, one line."""
    text = ROLE.sub(lambda found: found["text"].replace("%s", "").strip() or found["target"] or "", markdown)
    return " ".join(re.sub(r"[*_`$\\]", "", text).split())


def alt_texts(notebook: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """The notebook with an alt text on each code cell that draws an image: the first sentences of the figure
    caption in the next markdown cell ("Figure: " and the cell's first comment where no caption follows)."""
    cells = notebook.cells
    for k, cell in enumerate(cells):
        images = [kind for out in cell.get("outputs", []) for kind in out.get("data", {}) if kind.startswith("image/")]
        if cell.cell_type != "code" or not images:
            continue
        following = next((later.source for later in cells[k + 1:] if later.cell_type == "markdown"), "")
        caption = CAPTION.search(following)
        if caption:
            alt = " ".join(SENTENCE_END.split(plain(caption["text"]))[:ALT_SENTENCES])
        else:
            comment = next((line.lstrip("# ") for line in cell.source.splitlines() if line.startswith("#")), "a chart")
            alt = f"Figure: {comment}"
        cell.metadata.setdefault("mystnb", {}).setdefault("image", {})["alt"] = alt
    return notebook


def read(text: str) -> nbformat.NotebookNode:
    """Read a .ipynb notebook's text as myst-nb's default reader does, with its code folded and its charts' alt
    texts set."""
    return alt_texts(fold_code(nbformat.reads(text, as_version=4)))
