"""Every case of every test can be browsed offline from the report (issue 56: the report showed three cases per failed
test; HELM browses every instance): a page per chapter listing its tests, a page per test holding every record,
linked from the report, with no scripts."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

from llmaudit.config import read_params_file
from llmaudit.report import build_report
from llmaudit.report.audited import read_audited
from llmaudit.report.card import write_card
from llmaudit.report.case_pages import case_page, page_path
from llmaudit.report.evidence import write_cases
from test_answer import audited

LAMBDAS = (-1.0, 0.0, 1.0)


def records() -> pd.DataFrame:
    """A passed black-box test over 30 cases (two groups each) and a sweep over 4 cases at three lambdas."""
    gap = [{"test": "credit.blackbox_explicit", "unit": str(case), "value": 0.001, "group": group, "lam": None,
            "prompt_sha": None, "prompt": f"Customer {case}, gender: {group}. <b>", "metric": 0.4,
            "mass": 0.9} for case in range(30) for group in ("female", "male")]
    sweep = [{"test": "credit.whitebox_slope", "unit": str(case), "value": 0.03, "group": None, "lam": lam,
              "prompt_sha": None, "prompt": f"Customer {case}, gender: unknown.", "metric": 0.4 + 0.03 * lam,
              "mass": 0.9} for case in range(4) for lam in LAMBDAS]
    return pd.DataFrame(gap + sweep)


def test_every_record_of_every_test_has_a_page_linked_from_the_report(tmp_path: Path) -> None:
    folder = audited(tmp_path)
    write_cases(folder, "decision_tasks", records())
    write_card(folder, read_params_file("ci"), {})
    report = build_report(read_audited(folder), "Audit", []).read_text()
    assert f'href="{page_path("decision_tasks")}"' in report  # the report links the chapter's page
    assert f'href="{case_page("decision_tasks", "credit.blackbox_explicit")}"' in report  # and the verdict page's row
    chapter = (folder / page_path("decision_tasks")).read_text()
    for test in ("credit.blackbox_explicit", "credit.whitebox_slope"):
        assert f'href="decision_tasks/{Path(case_page("decision_tasks", test)).name}"' in chapter
    gap = (folder / case_page("decision_tasks", "credit.blackbox_explicit")).read_text()
    assert len(re.findall(r"<tr><td>", gap)) == 60  # every record, not the three that differ most
    assert "30 cases, 60 records" in gap and "&lt;b&gt;" in gap and "<b>" not in gap  # prompts escaped
    sweep = (folder / case_page("decision_tasks", "credit.whitebox_slope")).read_text()
    assert sweep.count("Customer 3, gender: unknown.") == 1  # a sweep's one prompt shown once per case
    assert "λ = +1" in sweep
    for page in (folder / "cases").rglob("*.html"):
        assert "<script" not in page.read_text(), page
