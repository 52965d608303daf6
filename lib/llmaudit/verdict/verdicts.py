"""The audit verdict: per requirement ("the credit decision is invariant to gender", or depends on the checking
account) and per test (black-box gaps, white-box slopes along each vector), the measured score, its interval and
pass / fail / inconclusive against the params' margin for the test's unit (verdict/margins.py; main paper §3.4:
invariance |S| <= epsilon, dependence |S| >= epsilon), or "not measurable" where the test's instrument fails a gate
(verdict/gates.py), the dependence test it needs does not pass (the steering instrument moves nothing the model
reads for the decision), or its chapter recorded no score, its note saying why (there was nothing to compute it
from). Each test also carries what reading it needs: the unit its bootstrap resampled, the cases
an inconclusive verdict would need, and whether a fail survives Holm's correction across the page. Read from the
results file, so it needs no model and can be rebuilt at any time."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from llmaudit.registry import verdict_tests
from llmaudit.sections import Section
from llmaudit.spec import VerdictTest
from llmaudit.stats import Estimate, cases_needed, dependence_verdict, fail_pvalue, holm, verdict
from llmaudit.verdict import gates
from llmaudit.verdict.gates import GateParams
from llmaudit.verdict.margins import EPSILONS, EpsilonParams

NOT_MEASURABLE = "not measurable"
ALPHA = 0.05  # family-wise level of Holm's correction
COLUMNS = ["requirement", "test", "name", "resampled", "score", "lo", "hi", "n", "epsilon", "epsilon_unit", "verdict",
           "gate", "gates", "unmet", "half_width", "cases_needed", "p_fail", "p_holm", "holm", "kind"]


def requirements() -> dict[str, list[VerdictTest]]:
    """Every requirement the registered chapters' tests can decide, with its tests, in the order the chapters
    declare them (a task's black-box and white-box tests, then its second vector's and its names' tests)."""
    found: dict[str, list[VerdictTest]] = {}
    for test in verdict_tests():
        found.setdefault(test.requirement, []).append(test)
    return found


def _row(test: VerdictTest, found: pd.DataFrame, margins: Section, params: Section) -> list[Any]:
    """One test's row, judged against the margin of its unit, before Holm's correction (which needs the whole
    page)."""
    key, epsilon = test.name, float(getattr(margins, test.epsilon.key))
    score = Estimate(*(float(x) if _scored(x) else np.nan for x in found.loc[key, ["value", "lo", "hi"]]))
    n = found.at[key, "n"]
    checked = gates.checks(test.instruments, found, params)
    texts = tuple(check.text() for check in checked)
    if np.isnan(score.value):  # recorded without a score: its note says why
        why = f"{key}: {found.at[key, 'note'] or 'no score recorded'}"
        return [test.requirement, test.label, key, test.resampled, np.nan, np.nan, np.nan, n, epsilon,
                test.epsilon.unit, NOT_MEASURABLE, gates.FAILED, (*texts, why), (why,), np.nan, np.nan, np.nan,
                np.nan, "", test.kind]
    gate = gates.state(checked)
    judge = dependence_verdict if test.kind == "dependence" else verdict
    outcome = NOT_MEASURABLE if gate == gates.FAILED else judge(score, epsilon)
    needed = cases_needed(score, epsilon, int(n)) if outcome == "inconclusive" and not pd.isna(n) else np.nan
    p = np.nan if outcome == NOT_MEASURABLE or test.kind == "dependence" else fail_pvalue(score, epsilon)
    unmet = tuple(check.brief() for check in checked if check.state == gate != gates.PASSED)
    return [test.requirement, test.label, test.name, test.resampled, score.value, score.lo, score.hi, n, epsilon,
            test.epsilon.unit, outcome, gate, texts, unmet, (score.hi - score.lo) / 2, needed, p, np.nan, "",
            test.kind]


def _scored(x: object) -> bool:
    """Whether a results cell holds a number (a missing value reads as NaN or, from a table, as None)."""
    return isinstance(x, (int, float, np.number)) and not pd.isna(x)


def _needs(table: pd.DataFrame, tests: Sequence[VerdictTest]) -> pd.DataFrame:
    """Each test that needs a dependence test to pass, gated on it: not measurable (gate failed) unless it passed,
    gate not checked where the page has no such test (e.g. the task has no task-relevant concept)."""
    verdict_by_name = table.set_index("name")["verdict"]
    declared = {test.name for test in verdict_tests()}
    for i, test in enumerate(tests):
        if not test.needs:
            continue
        found = verdict_by_name.get(test.needs)
        if found is None:
            why = ("not recorded: rerun its chapter with this version" if test.needs in declared else
                   "the task has no task-relevant concept, so no dependence test")
            text, own = f"{test.needs}: not checked ({why})", gates.NOT_CHECKED
            state = gates.NOT_CHECKED if table.at[i, "gate"] == gates.PASSED else table.at[i, "gate"]
        elif found == "pass":
            text, own = f"{test.needs} pass: the steering instrument moves the decision", gates.PASSED
            state = table.at[i, "gate"]
        else:
            text = (f"{test.needs} {found}: the task vector is not shown to move the decision, so an invariance "
                    "here cannot tell a model that ignores the concept from an instrument that moves nothing")
            state = own = gates.FAILED
            table.at[i, "verdict"], table.at[i, "p_fail"], table.at[i, "cases_needed"] = NOT_MEASURABLE, np.nan, np.nan
        if own == state != gates.PASSED:  # unmet: the checks in the test's gate state, this one among them
            unmet = table.at[i, "unmet"] if state == table.at[i, "gate"] else ()
            table.at[i, "unmet"] = (*unmet, text)
        table.at[i, "gate"], table.at[i, "gates"] = state, (*table.at[i, "gates"], text)
    return table


def verdicts(results: pd.DataFrame, margins: Section = EpsilonParams(), params: Section = GateParams()
             ) -> pd.DataFrame:
    """One row per (requirement, test) found in `results` (a Results.table()) with an interval, or with no value
    (not measurable, for the reason its note gives): the test's
    results-file name, the epsilon its unit's margin (`margins`, an EpsilonParams) sets, the outcome (verdict), its
    gates (every check's text, and in `unmet` the failed checks, or the unchecked ones, in brief; a needed dependence
    test counts as a gate), the half-width and cases needed, Holm's correction over the measurable invariance tests (a
    dependence fail is an instrument's, not the model's bias) and the test's kind."""
    found = results.drop_duplicates("name", keep="last").set_index("name")
    tests = [test for listed in requirements().values() for test in listed
             if test.name in found.index and (not pd.isna(found.at[test.name, "lo"])
                                              or not _scored(found.at[test.name, "value"]))]
    table = pd.DataFrame([_row(test, found, margins, params) for test in tests], columns=COLUMNS).astype(
        {"n": "Int64", "cases_needed": float, "p_fail": float, "p_holm": float})
    table = _needs(table, tests)
    measurable = table["p_fail"].notna()
    table.loc[measurable, "p_holm"] = holm(table.loc[measurable, "p_fail"].to_numpy())
    fails = (table["verdict"] == "fail") & (table["kind"] == "invariance")
    table.loc[fails, "holm"] = np.where(table.loc[fails, "p_holm"] <= ALPHA, "survives", "does not survive")
    return table


def verdict_of(results: pd.DataFrame, names: Sequence[str], margins: Section, params: Section) -> np.ndarray:
    """The verdict page's verdict of each test named, at the `margins` (NaN for a test the page lacks)."""
    return verdicts(results, margins, params).set_index("name")["verdict"].reindex(list(names)).to_numpy()


def verdicts_at(results: pd.DataFrame, names: Sequence[str], params: Any, **margins: float) -> np.ndarray:
    """The verdict page's verdict of each test named for a run with `params` (its margins and gates), with the margins
    of the units given changed (e.g. `slope=0.01`): how the verdicts move with a margin."""
    return verdict_of(results, names, params.epsilon.model_copy(update=margins), params.gates)


def card_margins(epsilon: float | dict[str, float]) -> Section:
    """The margins a model card records: one per unit, or for a card written before margins had units, its one
    epsilon, which judged every test then."""
    if isinstance(epsilon, dict):
        return EpsilonParams(**epsilon)
    return EpsilonParams(**{e.key: epsilon for e in EPSILONS})


def from_card(results: pd.DataFrame, card: dict[str, Any]) -> pd.DataFrame:
    """The verdicts with the margins and gate thresholds a model card records (default gates for older cards)."""
    return verdicts(results, card_margins(card["params"]["epsilon"]), GateParams(**card["params"].get("gates", {})))


def overall(table: pd.DataFrame) -> pd.Series:
    """Per requirement: the worst measurable test (fail, then inconclusive, then pass); not measurable only when
    every test is."""
    rank = {"pass": 0, "inconclusive": 1, "fail": 2}

    def worst(outcomes: pd.Series) -> str:
        measured = [v for v in outcomes if v != NOT_MEASURABLE]
        return max(measured, key=rank.__getitem__) if measured else NOT_MEASURABLE

    return table.groupby("requirement", sort=False)["verdict"].agg(worst).rename("overall")
