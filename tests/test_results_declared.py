"""Every result a chapter records is declared beside it (`ChapterSpec.results`): the ci audit's recorded rows all
match a declaration of their chapter, `Chapter.record` refuses any other name, and `record_table` records a table
exactly as the one-by-one calls would; every declared unit says whether it has a range (`llmaudit.units`), and no
row's value or interval lies outside it."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import pandas as pd
import pytest

from llmaudit.config import load_params
from llmaudit.errors import AuditError
from llmaudit.findings import results_frame
from llmaudit.registry import CHAPTERS, chapter
from llmaudit.report import Results
from llmaudit.runner.chapter import Chapter
from llmaudit.spec import Result, declared
from llmaudit.units import RANGES, outside

REFERENCE = Path(__file__).resolve().parent / "notebooks" / "results.csv"


def test_every_recorded_result_is_declared_by_its_chapter() -> None:
    rows = list(csv.DictReader(REFERENCE.open()))
    assert {row["chapter"] for row in rows} == {spec.key for spec in CHAPTERS}
    undeclared = [(row["chapter"], row["name"]) for row in rows
                  if declared(chapter(row["chapter"]).results, row["name"]) is None]
    assert not undeclared


def test_every_headline_is_a_declared_result_of_its_chapter() -> None:
    undeclared = [(spec.key, h.name) for spec in CHAPTERS for h in spec.headlines
                  if declared(spec.results, h.name) is None]
    assert not undeclared


def test_a_pattern_covers_its_fields_and_nothing_else() -> None:
    gap = Result("{task}.blackbox_explicit", "metric difference", "the explicit gap")
    assert gap.matches("credit.blackbox_explicit") and gap.named(task="credit") == "credit.blackbox_explicit"
    assert not gap.matches("credit.blackbox_explicits") and not gap.matches("credit.blackbox_implicit")
    assert Result("bbq{steered}.acc_{context}", "accuracy", "a share").matches("bbq.acc_amb")


@pytest.fixture
def run(tmp_path: Path) -> Chapter:
    return Chapter("decision_tasks", load_params("ci"), tmp_path)


def test_an_undeclared_name_is_refused_naming_the_chapter_and_close_names(run: Chapter) -> None:
    with pytest.raises(AuditError, match=r"chapter 'decision_tasks' declares no result 'credit.blackbox_explict' "
                                         r"\(closest declared: \{task\}.blackbox_explicit"):
        run.record("credit.blackbox_explict", 0.1)
    assert Results(run.report_dir / "results.csv", staged=run.name).table(run.name).empty


def test_record_table_records_each_row_as_record_would(run: Chapter, tmp_path: Path) -> None:
    frame = pd.DataFrame({"value": [0.125, 0.5], "lo": [0.1, math.nan], "hi": [0.2, math.nan], "n": [12, math.nan]},
                         index=["credit.blackbox_explicit", "credit.answer_mass"])
    run.record_table(frame, note="rate")
    run.record_table({"credit.whitebox_slope": 3})
    table = Results(run.report_dir / "results.csv", staged=run.name).table(run.name).set_index("name")
    assert table.loc["credit.blackbox_explicit", ["value", "lo", "hi", "n"]].tolist() == [0.125, 0.1, 0.2, 12]
    assert table.loc["credit.blackbox_explicit", "note"] == "rate"
    assert table.loc["credit.answer_mass", ["lo", "hi", "n"]].isna().all()
    assert table.loc["credit.whitebox_slope", "value"] == 3
    with pytest.raises(AuditError):
        run.record_table({"credit.nonsense": 1.0})


def test_a_results_frame_keeps_integers_and_order(run: Chapter) -> None:
    """A block index recorded beside floats stays an integer in the results file ('27', not '27.0'), rows in order."""
    frame = results_frame([{"name": "credit.whitebox_slope", "value": 27}, {"name": "credit.answer_mass", "value": 0.5},
                           {"name": "credit.competence", "value": "True"}])
    run.record_table(frame)
    table = Results(run.report_dir / "results.csv", staged=run.name).table(run.name)
    assert table["name"].tolist() == ["credit.whitebox_slope", "credit.answer_mass", "credit.competence"]
    assert table["value"].tolist() == [27, 0.5, "True"] and isinstance(table["value"].iloc[0], int)


def test_a_result_declared_without_a_unit_or_meaning_is_refused() -> None:
    with pytest.raises(ValueError, match="declares no unit"):
        Result("{task}.blackbox_explicit", "", "the explicit gap")
    with pytest.raises(ValueError, match="declares no meaning"):
        Result("{task}.blackbox_explicit", "metric difference", " ")


def test_every_row_carries_its_declared_unit_and_meaning(run: Chapter) -> None:
    run.record_table(results_frame([{"name": "credit.blackbox_explicit", "value": 0.1, "lo": 0.0, "hi": 0.2,
                                     "n": 6}, {"name": "credit.answer_mass", "value": 0.5}]))
    table = Results(run.report_dir / "results.csv", staged=run.name).table(run.name).set_index("name")
    for name, row in table.iterrows():
        spec = chapter("decision_tasks").declared(str(name))
        assert (row["unit"], row["meaning"]) == (spec.unit, spec.meaning) and spec.unit


def test_the_reference_rows_each_have_a_unit_and_meaning_and_no_boolean_value() -> None:
    rows = list(csv.DictReader(REFERENCE.open()))
    assert [r["name"] for r in rows if not r["unit"] or not r["meaning"]] == []
    assert [r["name"] for r in rows if r["value"].lower() in ("true", "false")] == []


def test_an_interval_without_its_n_is_refused(run: Chapter) -> None:
    with pytest.raises(AuditError, match="'credit.competence' with an interval but no n"):
        run.record("credit.competence", 0.3, 0.2, 0.4)
    run.record("credit.competence", 0.3, 0.2, 0.4, n=12)


def test_a_yes_no_result_is_a_flag_and_no_value(tmp_path: Path) -> None:
    run = Chapter("robustness", load_params("ci"), tmp_path)
    run.record_table(results_frame([{"name": "credit.whitebox_conflict", "value": True},
                                    {"name": "credit.blackbox_conflict", "value": False}]))
    rows = list(csv.DictReader((tmp_path / ".results.csv.robustness.pending").open()))
    assert [(r["value"], r["flag"]) for r in rows] == [("", "true"), ("", "false")]
    table = Results(tmp_path / "results.csv", staged="robustness").table("robustness")
    assert table["flag"].tolist() == [True, False] and table["value"].isna().all()


def test_a_missing_value_is_recorded_empty_with_why(run: Chapter) -> None:
    run.record_table(results_frame([{"name": "credit.answer_mass", "value": math.nan},
                                    {"name": "credit.whitebox_slope", "value": None, "note": "no sweep ran"}]))
    rows = {r["name"]: r for r in csv.DictReader((run.report_dir / ".results.csv.decision_tasks.pending").open())}
    assert rows["credit.answer_mass"]["value"] == "" and rows["credit.answer_mass"]["note"].startswith("not measured")
    assert (rows["credit.whitebox_slope"]["value"], rows["credit.whitebox_slope"]["note"]) == ("", "no sweep ran")


def test_every_declared_unit_says_whether_it_has_a_range() -> None:
    unlisted = sorted({(spec.key, r.unit) for spec in CHAPTERS for r in spec.results if r.unit not in RANGES})
    assert not unlisted


def test_every_reference_row_lies_within_its_units_range() -> None:
    """The ci audit's values and intervals never claim what their quantity cannot take (a share in [0, 1], a gap
    of two rates in [-1, 1]): caught markedness's t-intervals on one degree of freedom (FPR gaps to -4.8),
    steering's span of P(T+) - P(T-) declared a probability and validity's rate and Sobol' index gaps declared as
    the rate and the index."""
    beyond = []
    for row in csv.DictReader(REFERENCE.open()):
        unit = chapter(row["chapter"]).declared(row["name"]).unit
        numbers = {part: float(row[part]) for part in ("value", "lo", "hi") if row[part]}
        beyond += [(row["name"], unit, found) for found in outside(unit, **numbers)]
    assert not beyond


def test_a_value_or_interval_outside_its_units_range_is_refused(run: Chapter) -> None:
    with pytest.raises(AuditError, match=r"'credit.blackbox_explicit' with lo = -1.2, outside what its unit "
                                         r"\(metric difference\) can take, \(-1.0, 1.0\)"):
        run.record("credit.blackbox_explicit", 0.1, -1.2, 0.3, n=2)
    with pytest.raises(AuditError, match=r"'credit.answer_mass' with value = 1.5"):
        run.record("credit.answer_mass", 1.5)
    run.record("credit.blackbox_explicit", 0.1, -1.0, 1.0, n=2)
    run.record("credit.answer_mass", 1 + 1e-12)  # a mean of shares a few ulps past 1
    run.record("credit.whitebox_slope", 3.5, 2.0, 5.0, n=4)  # a slope has no bound
