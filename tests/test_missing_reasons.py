"""A missing number says why, cell by cell, wherever a table prints it (issue 56): the em dash is followed by a
footnote mark whose one-sentence reason is listed once under the table, in the book's tables (HTML and text), the
report's own tables (verdict page, headline numbers) and the notebook tables it embeds; results.csv refuses a row
with neither a value nor a note saying why. A table with nothing missing stays plain."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from IPython.core.interactiveshell import InteractiveShell

from llmaudit.chapters.display import book_tables
from llmaudit.chapters.framing import tables as framing
from llmaudit.chapters.validity.shifts import LEVEL_PER_CASE, shifts
from llmaudit.footnotes import UNEXPLAINED, explain
from llmaudit.report import Results
from llmaudit.report.tables import tidy
from llmaudit.report.verdict_page import verdict_section
from llmaudit.verdict.verdicts import verdicts

DASH = re.compile(r"—([¹²³⁴⁵⁶⁷⁸⁹⁰]*)")


@pytest.fixture
def shell():
    """A real IPython shell with the book's tables set, as a chapter's kernel runs it; options restored after."""
    with pd.option_context("display.float_format", None):
        shell = InteractiveShell.instance()
        book_tables("{:+.4f}")
        yield shell
    InteractiveShell.clear_instance()


def shown(shell: InteractiveShell, frame: pd.DataFrame) -> dict[str, str]:
    """The frame's HTML and text as a chapter's notebook shows them."""
    return shell.display_formatter.format(frame)[0]


def reasons(page: str) -> list[str]:
    """The reasons listed under the tables of `page` (HTML), in order."""
    return re.findall(r"<li>[¹²³⁴⁵⁶⁷⁸⁹⁰]+ — (.*?)\.</li>", page)


def test_each_missing_cell_carries_its_reasons_mark_and_each_reason_is_said_once(shell) -> None:
    frame = pd.DataFrame({"slope": [0.1234, np.nan, np.nan], "gap": [np.nan, 0.5, 0.25]},
                         index=["credit", "medical_gender", "medical_race"])
    why = pd.DataFrame({"slope": ["", "the endpoint exposes no weights", "the endpoint exposes no weights"],
                        "gap": ["no case named an answer word", "", ""]}, index=frame.index)
    page = shown(shell, explain(frame, why))
    for mime in ("text/html", "text/plain"):
        table = page[mime].split('<ul class="why-missing"')[0].split("\n¹ — ")[0]
        marks = DASH.findall(table)
        assert sorted(marks) == sorted(["¹", "²", "²"]), (mime, page[mime])  # no bare dash: every one is marked
    assert reasons(page["text/html"]) == ["no case named an answer word", "the endpoint exposes no weights"]
    assert page["text/plain"].count("the endpoint exposes no weights") == 1 and "+0.1234" in page["text/plain"]


def test_a_missing_cell_whose_code_gave_no_reason_says_that_under_the_table(shell) -> None:
    page = shown(shell, pd.DataFrame({"value": [0.5, np.nan]}))
    assert "—¹" in page["text/html"] and reasons(page["text/html"]) == [UNEXPLAINED]


def test_a_table_with_nothing_missing_stays_plain(shell) -> None:
    page = shown(shell, explain(pd.DataFrame({"value": [0.5, 0.25]}), "never used"))
    assert "why-missing" not in page["text/html"] and "never used" not in page["text/plain"]
    assert not DASH.search(page["text/plain"])


def test_a_report_table_with_a_bare_missing_cell_marks_it_and_says_no_reason_was_recorded() -> None:
    html = tidy(pd.DataFrame({"value": [0.5, np.nan]}, index=["a", "b"]).to_html())
    assert "<td>—¹</td>" in html and reasons(html) == [UNEXPLAINED] and "NaN" not in html


def test_chapter_tables_say_why_their_cells_are_missing(shell) -> None:
    answers = pd.DataFrame({"gender": [False, False], "answer": ["they are a woman", "they left"],
                            "family": ["they", "they"]})
    deferred = shown(shell, framing.deferred(answers, "plain").table)["text/html"]
    assert reasons(deferred) == [framing.NO_THEY]
    indices = pd.DataFrame({"task": "credit", "method": ["no attribute"] * 2 + ["black-box explicit"] * 2,
                            "variable": ["job", "age"] * 2, "value": [0.3, np.nan, 0.2, 0.1]})
    validity = shown(shell, shifts(indices).table)["text/html"]
    assert reasons(validity) == [LEVEL_PER_CASE]


def test_the_verdict_page_says_why_a_test_has_no_score(tmp_path: Path) -> None:
    results = Results(tmp_path / "results.csv")
    why = "not measurable: fewer than two cases whose sampled answers named an answer word in both groups"
    results.record("decision_tasks", "credit.blackbox_explicit", None, note=why)
    page = verdict_section(verdicts(results.table()))
    row = re.search(r'<tr id="[^"]*credit[^"]*blackbox[^"]*">.*?</tr>', page, re.S)
    assert row is not None and "—¹" in row[0] and "—</td>" not in row[0]
    assert reasons(page) == [why]


def test_a_results_row_with_no_value_needs_a_note_saying_why(tmp_path: Path) -> None:
    results = Results(tmp_path / "results.csv")
    with pytest.raises(ValueError, match="no value and no note"):
        results.record("framing", "chat.pronoun_shift", float("nan"))
    results.record("framing", "chat.pronoun_shift", None, note="no attribute has a defined effect")
    results.record("robustness", "credit.whitebox_conflict", False)  # a yes/no result: its flag is the answer
    rows = results.table().set_index("name")
    assert rows.at["chat.pronoun_shift", "note"] and rows.at["credit.whitebox_conflict", "flag"] is False
