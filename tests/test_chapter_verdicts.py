"""One verdict everywhere: the decision-tasks chapter's verdicts table and its stricter-margin exercise say per task
what the verdict page says of the task's white-box slope (gates included), read from the nbval reference notebooks
and the ci audit's results saved with them. A column labelled "ungated" (interval only) is exempt."""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest

from llmaudit.chapters.decision_tasks import TASKS
from llmaudit.chapters.decision_tasks.spec import method
from llmaudit.config import load_params
from llmaudit.report import Results
from llmaudit.verdict.verdicts import verdicts, verdicts_at

REFERENCES = Path(__file__).resolve().parent / "notebooks"
CHAPTER = REFERENCES / "02_decision_tasks.ipynb"
VERDICT = re.compile(r"not measurable|inconclusive|pass|fail")
EPSILON = re.compile(r"epsilon = ([0-9.]+)")


def shown_text(cell: nbformat.NotebookNode) -> str:
    """The text/plain a code cell displayed (a DataFrame as pandas prints it, wrapped in column blocks)."""
    return "\n".join(out.get("data", {}).get("text/plain", "") for out in cell.get("outputs", []))


def code_cell(nb: nbformat.NotebookNode, marker: str) -> nbformat.NotebookNode:
    """The code cell whose source holds `marker` (the captions' numbers are the book's, not text to search for)."""
    return next(cell for cell in nb.cells if cell.cell_type == "code" and marker in cell.source)


def row_verdicts(text: str) -> dict[str, list[str]]:
    """Per task row of a printed table, the verdict words along the row, through every wrapped column block."""
    rows: dict[str, list[str]] = {}
    for line in text.splitlines():
        first = line.split(maxsplit=1)
        if first and first[0] in TASKS:
            rows.setdefault(first[0], []).extend(VERDICT.findall(first[1] if len(first) > 1 else ""))
    return rows


def page(epsilon: float) -> dict[str, str]:
    """The verdict page's verdict of each task's white-box slope at this slope margin, from the saved ci results."""
    params = load_params("ci")
    margins = params.epsilon.model_copy(update={"slope": epsilon})
    table = verdicts(Results(REFERENCES / "results.csv").table(), margins, params.gates)
    found = table.set_index("name")["verdict"]
    return {task: found[method(task, "whitebox_slope")] for task in TASKS if method(task, "whitebox_slope") in found}


@pytest.fixture(scope="module")
def chapter() -> nbformat.NotebookNode:
    return nbformat.read(CHAPTER, as_version=4)


def test_table_2_1_gives_the_verdict_pages_verdicts(chapter) -> None:
    text = shown_text(code_cell(chapter, "summary(found, audits, verdicts_at("))
    if "ungated" in text:
        pytest.skip("Table 2.1 labels its column as the interval-only verdict")
    shown = row_verdicts(text)
    expected = page(load_params("ci").epsilon.slope)
    assert shown and set(shown) == set(expected)
    assert shown == {task: [v] for task, v in expected.items()}


def test_exercise_2_1_gives_the_verdict_pages_verdicts_at_both_margins(chapter) -> None:
    text = shown_text(code_cell(chapter, "margins = ("))
    margins = list(dict.fromkeys(float(eps) for eps in EPSILON.findall(text)))  # each margin, as its tables print it
    assert len(margins) == 2 and "ungated" not in text
    expected = [page(eps) for eps in margins]
    # per task, the gated verdict at each margin, then what each slope's interval alone says at each
    shown = {task: found[:len(margins)] for task, found in row_verdicts(text).items()}
    assert set(shown) == set(expected[0])
    assert shown == {task: [at[task] for at in expected] for task in shown}


def test_verdicts_at_a_margin_are_the_verdict_pages_at_that_margin() -> None:
    """The chapter's call (`verdicts_at`) changes the one margin it is given and keeps the gates: a slope test at a
    zero margin can no longer pass."""
    params, results = load_params("ci"), Results(REFERENCES / "results.csv").table()
    for epsilon in (params.epsilon.slope, params.epsilon.slope / 2, 0.0):
        expected = page(epsilon)
        found = verdicts_at(results, [method(task, "whitebox_slope") for task in expected], params, slope=epsilon)
        assert expected and list(found) == list(expected.values())
    assert "pass" not in expected.values()


def test_the_check_reads_a_disagreeing_table() -> None:
    text = ("                     epsilon = 0.02\njudicial_conviction            fail\ncredit  not measurable\n"
            "competence n/a")
    assert row_verdicts(text) == {"judicial_conviction": ["fail"], "credit": ["not measurable"]}
