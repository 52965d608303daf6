"""A decision task audited on a model that cannot be steered (an endpoint): its black-box gaps and answer mass are
estimated as for any model, and each white-box test is recorded without a value, its note saying why, which the
verdict page shows as not measurable."""

from __future__ import annotations

import pandas as pd
import pytest

from llmaudit.capabilities import NO_WEIGHTS
from llmaudit.chapters.decision_tasks import TASKS
from llmaudit.chapters.decision_tasks.estimates import estimates
from llmaudit.chapters.decision_tasks.evaluate import TaskAudit


def _black(task: str, gap: float) -> pd.DataFrame:
    """Explicit prompts of 12 cases, the first group's metric `gap` above the second's."""
    first, second = TASKS[task].groups
    return pd.DataFrame([{"case": str(i), "group": group, "metric": 0.5 + shift + 0.01 * i, "mass": 0.9, "fact": i}
                         for i in range(12) for group, shift in ((first, gap), (second, 0.0))])


def test_white_box_tests_are_recorded_not_measurable_and_black_box_ones_estimated() -> None:
    audit = TaskAudit(TASKS["credit"], None, {"explicit": _black("credit", 0.1)}, None)
    found = estimates({"credit": audit}, 200, 0)
    results = found.results
    assert results.at["credit.blackbox_explicit", "value"] == pytest.approx(0.1)
    assert results.at["credit.whitebox_slope", "note"] == NO_WEIGHTS
    assert pd.isna(results.at["credit.whitebox_slope", "value"])
    assert results.at["credit.answer_mass", "value"] == pytest.approx(0.9)
    assert set(found.table["method"]) == {"black-box explicit"}  # no white-box row in the chapter's tables
