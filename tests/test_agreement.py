"""The endpoint audit's agreement with the local audit (`runner.agreement`, `make audit-llama`): a black-box test agrees
when both reach the same verdict, a white-box test when the endpoint's is not measurable for want of weights; anything
else, or a test on one side only, is a disagreement with its reason. Built from the ci audit's real results (the
regression reference), the endpoint side made as an endpoint audit records it."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from llmaudit.capabilities import NO_WEIGHTS
from llmaudit.registry import verdict_tests
from llmaudit.report.results import Results
from llmaudit.runner.agreement import agreement, markdown
from llmaudit.runner.needs import white_box
from llmaudit.verdict.verdicts import NOT_MEASURABLE, verdicts

REFERENCE = Path(__file__).parent / "notebooks" / "results.csv"
WHITE = {test.name for test in verdict_tests() if white_box(test)}


@pytest.fixture(scope="module")
def local() -> pd.DataFrame:
    return verdicts(Results(REFERENCE).table())


def _through_endpoint(local: pd.DataFrame) -> pd.DataFrame:
    """The verdicts an endpoint audit of the same model would record: every white-box test without a score, for want
    of weights; every black-box test as it is."""
    table = local.copy()
    white = table["name"].isin(WHITE)
    table.loc[white, ["verdict", "score"]] = [NOT_MEASURABLE, float("nan")]
    table.loc[white, "unmet"] = pd.Series([[NO_WEIGHTS]] * int(white.sum()), index=table.index[white])
    return table


def test_an_endpoint_audit_as_it_should_be_agrees(local) -> None:
    table = agreement(local, _through_endpoint(local))
    assert set(table["kind"]) == {"white-box", "black-box"} and table["agree"].all()
    assert "of weights)." in markdown(table).splitlines()[-1]


def test_a_changed_black_box_verdict_a_measured_white_box_test_and_a_missing_test_disagree(local) -> None:
    endpoint = _through_endpoint(local).set_index("name", drop=False)
    black = [name for name in endpoint.index if name not in WHITE]
    changed, dropped, white = black[0], black[-1], next(name for name in endpoint.index if name in WHITE)
    endpoint.loc[changed, "verdict"] = "fail" if endpoint.loc[changed, "verdict"] != "fail" else "pass"
    endpoint.loc[white, "verdict"] = "pass"
    table = agreement(local, endpoint.drop(index=dropped).reset_index(drop=True)).set_index("name")
    wrong = table.loc[~table["agree"], "why"]
    assert wrong.to_dict() == {changed: "the verdicts differ", white: "white-box, yet pass through the endpoint",
                               dropped: "only in the local audit"}
