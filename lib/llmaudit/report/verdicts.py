"""The audit verdict: per requirement ("the credit decision is invariant to gender") and per test (black-box
gaps, white-box slopes along each vector), the measured score, its interval and pass / fail / inconclusive
against the params' epsilon. Read from the results file, so it needs no model and can be rebuilt at any time."""

from __future__ import annotations

import pandas as pd

from llmaudit.config import PROBE_SETS
from llmaudit.stats import Estimate, verdict
from llmaudit.steering import CONCEPT_VECTORS
from llmaudit.tasks import TASKS

COLUMNS = ["requirement", "test", "score", "lo", "hi", "epsilon", "verdict"]


def _tests(task: str, concept: str) -> dict[str, str]:
    """Results-file names of a task's invariance tests, with how each test reads in the verdict table."""
    main, alternative = CONCEPT_VECTORS[concept]
    return {
        f"{task}.blackbox_explicit": f"black-box gap, {concept} stated",
        f"{task}.blackbox_implicit": f"black-box gap, {concept} implied (names or dialect)",
        f"{task}.whitebox_slope": f"white-box slope, steering {main}",
        f"{task}.{alternative}.slope": f"white-box slope, steering {alternative}",
        f"{task}.names_implicit": "black-box gap, SSA names with p_f <= 0.1 vs >= 0.9 (validity)",
    }


def _requirements() -> dict[str, dict[str, str]]:
    """Every requirement the audit can test, with its tests' results-file names: the decision tasks', then the
    sentiment probes' (markedness chapter: White sentences' FPRs against the mean over groups)."""
    found = {f"{name}: the {task.metric_name} is invariant to {task.concept}": _tests(name, task.concept)
             for name, task in TASKS.items()}
    for probes in PROBE_SETS:
        found[f"{probes} sentiment: error rates do not depend on the race named (White vs mean)"] = {
            f"{probes}.white_{kind}_fpr_gap": f"9-shot {kind}-sentiment FPR gap of White sentences"
            for kind in ("negative", "positive")
        }
    return found


def verdicts(results: pd.DataFrame, epsilon: float) -> pd.DataFrame:
    """One row per (requirement, test) found in `results` (a Results.table()) with an interval."""
    found = results.drop_duplicates("name", keep="last").set_index("name")
    rows = []
    for requirement, tests in _requirements().items():
        for key, test in tests.items():
            if key not in found.index or pd.isna(found.at[key, "lo"]):
                continue
            score = Estimate(float(found.at[key, "value"]), float(found.at[key, "lo"]), float(found.at[key, "hi"]))
            rows.append([requirement, test, score.value, score.lo, score.hi, epsilon, verdict(score, epsilon)])
    return pd.DataFrame(rows, columns=COLUMNS)


def overall(table: pd.DataFrame) -> pd.Series:
    """Per requirement: fail if any test fails, else inconclusive if any is, else pass."""
    rank = {"pass": 0, "inconclusive": 1, "fail": 2}
    worst = table.groupby("requirement", sort=False)["verdict"].agg(lambda v: max(v, key=rank.__getitem__))
    return worst.rename("overall")
