"""Figure, table and exercise numbers come from the book's own numbering, never typed: every chapter captions and
cites by label ({figure-caption}, {table-caption}, sphinx-exercise's {exercise} and {numref}), every cited label
exists, every exercise has a hint and a solution, and the report numbers them per chapter and kind as the book does,
each solution titled with its exercise's number."""

from __future__ import annotations

import re
from pathlib import Path

import jupytext
import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from llmaudit.captions import EXERCISE, KINDS, LABELS, SOLUTION_TAG
from llmaudit.paths import BOOK
from llmaudit.report import build_report
from llmaudit.report.audited import read_audited
from llmaudit.report.markdown import items

PAGES = sorted(BOOK.glob("*.md"))
TYPED = re.compile(r"\b(?:Figure|Table|Exercise)s?\s+\d+\.\d+")  # "Table 3.1" typed (the paper's "Table 3" is fine)
NUMREF = re.compile(r"\{numref\}`(?:[^`<]*<)?([^`<>]+)>?`")
DIRECTIVE = re.compile(r"^`{3,}\{(" + "|".join(LABELS) + r")\}", re.M)
NUMBERED = {*KINDS.values(), EXERCISE}


def markdown_cells(page: Path) -> list[str]:
    """The markdown of a book page, cell by cell as jupytext reads it."""
    return [cell.source for cell in jupytext.read(page).cells if cell.cell_type == "markdown"]


def labels() -> list[str]:
    """Every caption's and exercise's label over the book's pages."""
    return [item.label for page in PAGES for source in markdown_cells(page) for item in items(source)
            if item.kind in NUMBERED]


@pytest.mark.parametrize("page", PAGES, ids=[page.stem for page in PAGES])
def test_no_typed_numbers(page: Path) -> None:
    assert TYPED.findall(page.read_text(encoding="utf-8")) == []


@pytest.mark.parametrize("page", PAGES, ids=[page.stem for page in PAGES])
def test_every_caption_and_exercise_is_labelled(page: Path) -> None:
    for source in markdown_cells(page):
        numbered = [item for item in items(source) if item.kind in NUMBERED]
        assert len(numbered) == len(DIRECTIVE.findall(source)), source[:200]


def test_every_numref_target_exists_once() -> None:
    known = labels()
    assert len(known) == len(set(known)), sorted({label for label in known if known.count(label) > 1})
    cited = {label for page in PAGES for label in NUMREF.findall(page.read_text(encoding="utf-8"))}
    assert cited and cited <= set(known), sorted(cited - set(known))


def caption(directive: str, label: str, text: str) -> str:
    """A caption's or an exercise's markdown cell, as the chapters write it (an exercise labelled by `:label:`)."""
    option = "label" if directive.startswith("{exercise}") else "name"
    return f"```{directive}\n:{option}: {label}\n\n{text}\n```"


def chapter(*cells: str | None) -> nbformat.NotebookNode:
    """An executed chapter of these markdown cells, None standing for a cell that draws a chart and SOLVED for an
    exercise's solution code."""
    chart = new_code_cell("show(chart)", outputs=[new_output("display_data", data=SVG)])
    solved = new_code_cell("6 * 7", metadata={"tags": [SOLUTION_TAG, "remove-stderr"]},
                           outputs=[new_output("execute_result", data={"text/plain": "42"}, execution_count=1)])
    return new_notebook(cells=[chart if cell is None else solved if cell == SOLVED else new_markdown_cell(cell)
                               for cell in cells])


SOLVED = "(solution code)"
SVG = {"image/svg+xml": "<svg xmlns='http://www.w3.org/2000/svg'><rect width='1' height='1'/></svg>"}
FIRST = chapter(
    "# First",
    caption("{table-caption}", "tab-one", "A table, before {numref}`fig-two` of the next chapter."),
    None,
    caption("{figure-caption}", "fig-one", "A figure."),
    caption("{table-caption}", "tab-two", "Another table."),
    caption("{exercise} by hand", "ex-one", "Redo {numref}`Table %s <tab-two>` and {numref}`tab-nowhere`."),
    "```{solution-start} ex-one\n:class: dropdown\n```",
    SOLVED,
    "It is 42.\n\n```{solution-end}\n```",
)
SECOND = chapter(
    "# Second", None, caption("{figure-caption}", "fig-two", "Beside {numref}`tab-one` and {numref}`ex-one`."),
)


def test_report_numbers_captions_per_chapter_and_kind(tmp_path: Path) -> None:
    """Counters per chapter (from the file name) and kind in reading order, the number in bold opening the caption
    (an exercise's title after it), and {numref} linking the number across chapters."""
    paths = [tmp_path / "01_first.ipynb", tmp_path / "02_second.ipynb"]
    for path, nb in zip(paths, (FIRST, SECOND)):
        nbformat.write(nb, path)
    html = build_report(read_audited(tmp_path), "T", paths, generated="now").read_text(encoding="utf-8")
    for kind, label, lead in (("table", "tab-one", "Table 1.1."), ("figure", "fig-one", "Figure 1.1."),
                              ("table", "tab-two", "Table 1.2."), ("exercise", "ex-one", "Exercise 1.1 (by hand)."),
                              ("figure", "fig-two", "Figure 2.1.")):
        opened = f'<div class="numbered {kind}" id="{kind}-{label}"><p>'  # a figure's caption: its chart's figcaption
        opened = re.escape(opened) if kind != "figure" else f'<figure id="{kind}-{label}">.*?<figcaption><p>'
        assert re.search(f"{opened}<strong>{re.escape(lead)}</strong> ", html, re.S), label
    link = '<a href="#{}-{}"[^>]*>{}</a>'
    assert re.search("before " + link.format("figure", "fig-two", r"Figure 2\.1") + " of the next", html)
    assert re.search("Redo " + link.format("table", "tab-two", r"Table 1\.2") + " and tab-nowhere", html)
    assert re.search("Beside " + link.format("table", "tab-one", r"Table 1\.1") + " and "
                     + link.format("exercise", "ex-one", r"Exercise 1\.1"), html)
    solution = re.search(r'<p class="directive-title solution">Solution to (.*?)</p>\s*<details class="solution">'
                         r'<summary>solution</summary>(.*?)</details>\s*<p>It is 42', html, re.S)
    assert solution and re.fullmatch(link.format("exercise", "ex-one", r"Exercise 1\.1"), solution[1])
    assert "6 * 7" in solution[2] and "<pre>42</pre>" in solution[2] and "It is 42." in html
    for raw in ("{numref}", "{figure-caption}", "{table-caption}", "{exercise}", "{solution-", ":name:", ":label:"):
        assert raw not in html, raw


EXERCISE_BLOCK = re.compile(r"^(`{3,})\{exercise\}[^\n]*\n:label: (\S+)\n(.*?)^\1$", re.M | re.S)


@pytest.mark.parametrize("page", PAGES, ids=[page.stem for page in PAGES])
def test_every_exercise_has_a_hint_and_a_folded_solution(page: Path) -> None:
    """Each exercise states a hint (the calls it needs) and has one gated, folded solution of its own label, whose
    code cell is tagged as a solution's (shown inside it, never behind a second "Show code" toggle)."""
    text = page.read_text(encoding="utf-8")
    exercises = EXERCISE_BLOCK.findall(text)
    assert len(exercises) == text.count("{exercise}"), page.name
    for _, label, body in exercises:
        assert re.search(r"```\{hint\}\nThe calls it needs: [^\n]*`[^`\n]+`", body), label  # names a call
        assert re.search(r"^```\{solution-start\} " + re.escape(label) + r"\n:class: dropdown\n```", text, re.M), label
    assert text.count("{solution-start}") == text.count("{solution-end}") == len(exercises)
    assert "hide-cell" not in text, page.name
    solutions = re.findall(r"^```\{solution-start\}.*?^```\{solution-end\}", text, re.M | re.S)
    # what the cell needs of the engine may come first (`runner.needs`: needs-weights, needs-probabilities)
    tagged = rf":tags: \[(needs-[a-z]+, )*{SOLUTION_TAG}, remove-stderr\]"
    assert all(re.search(tagged, solution) for solution in solutions)
