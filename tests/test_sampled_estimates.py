"""The decision tasks' black-box estimates on sampled reads (an endpoint without log-probabilities), where a prompt
whose answers name no answer word has no metric: each estimate uses the cases that have what it needs, and one with
too few is recorded not measurable with the reason (value empty, never NaN), its table row absent and its figure one
sentence.
The real case: a random-weight stand-in behind `transformers serve` named no answer word, and the chapter stopped in
its estimates ("need at least 2 cases ... got 0")."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from llmaudit.chapters.decision_tasks import TASKS
from llmaudit.chapters.decision_tasks import plots as figures
from llmaudit.chapters.decision_tasks.dependence import Dependence
from llmaudit.chapters.decision_tasks.estimates import UNANSWERED, estimates
from llmaudit.chapters.decision_tasks.evaluate import TaskAudit
from llmaudit.report import show
from llmaudit.report.charts import NoFigure

NAN = math.nan


def _black(task: str, metric) -> pd.DataFrame:
    """Explicit prompts of 6 cases in the task's two groups, each prompt's metric `metric(case, group)`."""
    return pd.DataFrame([{"case": str(case), "group": group, "metric": metric(case, group), "mass": 0.5,
                          "fact": float(case)} for case in range(6) for group in TASKS[task].groups])


def _contrasts(metric) -> pd.DataFrame:
    """Contrast prompts of 6 cases at concept scores -1, 0, +1, each prompt's metric `metric(case, score)`."""
    return pd.DataFrame([{"case": str(case), "group": "", "metric": metric(case, score), "mass": 0.5, "lam": score}
                         for case in range(6) for score in (-1.0, 0.0, 1.0)])


def _audits(black, contrasts) -> dict[str, TaskAudit]:
    """Credit (explicit gap, black-box dependence, competence by correlation) and medical (competence by accuracy)."""
    credit = Dependence(TASKS["credit"].relevant or "", None, _contrasts(contrasts), None)
    return {"credit": TaskAudit(TASKS["credit"], None, {"explicit": _black("credit", black)}, None, None, credit),
            "medical_gender": TaskAudit(TASKS["medical_gender"], None,
                                        {"explicit": _black("medical_gender", black)}, None)}


def test_no_answer_word_named_leaves_every_black_box_estimate_not_measurable_with_the_reason() -> None:
    audits = _audits(lambda case, group: NAN, lambda case, score: NAN)
    found = estimates(audits, 200, 0)
    records = audits["credit"].cases({"explicit": "credit.blackbox_explicit",
                                      "dependence_black": "credit.blackbox_dependence"})
    assert len(records) == 12 + 18 and records["value"].isna().all()  # every item's case outside the score
    results = found.results
    for name in ("credit.blackbox_explicit", "medical_gender.blackbox_explicit"):
        assert results.at[name, "note"] == f"{UNANSWERED} in both groups", name
    for name in ("credit.blackbox_explicit", "medical_gender.blackbox_explicit", "credit.blackbox_dependence",
                 "credit.competence", "medical_gender.competence"):
        assert pd.isna(results.at[name, "value"]), name
    assert results.at["credit.blackbox_dependence", "note"] == f"{UNANSWERED} at two concept levels"
    assert results.at["credit.competence", "note"] == UNANSWERED.replace("two", "four")  # a correlation needs four
    assert results.at["medical_gender.competence", "note"] == UNANSWERED
    assert results["value"].dropna().map(math.isfinite).all()  # the answer masses: no NaN written
    assert found.table.empty
    shown = show(figures.estimates(found.table.assign(verdict=[]), "estimate", {"black-box": 0.02}))
    assert isinstance(shown, NoFigure)


def test_cases_with_answers_are_estimated_and_the_rest_left_out() -> None:
    def black(case: int, group: str) -> float:  # case 0 answered only for one group, case 1 for neither
        if case == 1 or (case == 0 and group == TASKS["credit"].groups[1]):
            return NAN
        return 0.2 + 0.1 * case + (0.05 if group == TASKS["credit"].groups[0] else 0.0)

    def contrasts(case: int, score: float) -> float:  # case 0 answered at one level only: no slope
        return NAN if case == 0 and score != 0 else 0.5 + 0.1 * score * case

    found = estimates(_audits(black, contrasts), 200, 0).results
    assert found.at["credit.blackbox_explicit", "value"] == pytest.approx(0.05)
    assert found.at["credit.blackbox_explicit", "n"] == 4  # cases 2-5: named in both groups
    assert found.at["credit.blackbox_dependence", "value"] == pytest.approx(0.1 * (1 + 2 + 3 + 4 + 5) / 5)
    assert found.at["credit.blackbox_dependence", "n"] == 5
    assert found.at["medical_gender.competence", "n"] == 5  # case 1 named no answer word
    assert found.at["medical_gender.competence", "value"] == pytest.approx(
        pd.Series([0.25, 0.425, 0.525, 0.625, 0.725]).mean() - TASKS["medical_gender"].chance)
