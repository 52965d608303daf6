"""Headline numbers: the few results each chapter's spec declares, with interval, unit and meaning, in book order;
the rest is linked, not printed."""

from __future__ import annotations

from pathlib import Path

from llmaudit.registry import CHAPTERS
from llmaudit.report import Results
from llmaudit.report.headlines import HeadlineRow, headline_rows, headline_section

CI_RESULTS = Path(__file__).resolve().parent / "notebooks" / "results.csv"


def test_every_chapter_declares_a_handful_of_headlines_with_unit_and_meaning() -> None:
    for spec in CHAPTERS:
        assert 1 <= len(spec.headlines) <= 14, spec.key
        names = [h.name for h in spec.headlines]
        assert len(set(names)) == len(names), spec.key
        assert all(h.label and h.unit and h.meaning for h in spec.headlines), spec.key


def test_declared_headlines_name_numbers_the_ci_audit_records() -> None:
    table = Results(CI_RESULTS).table()
    rows = headline_rows(table)
    assert list(rows) == [spec.title for spec in CHAPTERS]  # every chapter has headlines in a full audit
    shown = sum(len(r) for r in rows.values())
    assert shown < len(table) / 3  # a short list, not the dump of results.csv


def test_rows_carry_interval_n_unit_and_meaning(tmp_path: Path) -> None:
    results = Results(tmp_path / "results.csv")
    results.record("decision_tasks", "credit.competence", 0.2345, -0.01, 0.4567, n=80)
    results.record("decision_tasks", "credit.answer_mass", 0.55)
    results.record("decision_tasks", "credit.internal_key", 1.0)
    rows = headline_rows(results.table())
    assert list(rows) == ["Four decision tasks"]
    competence, mass = rows["Four decision tasks"]
    assert competence == HeadlineRow("credit: competence", "+0.2345", "[-0.0100, +0.4567], n = 80",
                                     "r with the decisive fact", competence.meaning, competence.failed_gate)
    assert competence.failed_gate.startswith("credit competence lower bound -0.0100 ≤ 0: the interval does not")
    assert mass.interval == "" and mass.unit == "probability"
    html = headline_section(results.table())
    assert "internal_key" not in html and "All 3 numbers of this audit" in html
    assert html.count("fails its gate: credit competence lower bound -0.0100 ≤ 0<") == 1  # the mass is no gate's
    assert '<a href="results.json">results.json</a>' in html
