"""The validity chapter's credit profiles with names (main paper §5): the profiles scored without gender or name and
with one SSA name per female-share bin, the bad credit rate by bin, and the credit gaps between female- and
male-majority names at each cut of p_f beside the task's own black-box estimates (and, apart, its white-box slopes)."""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from llmaudit.chapters.decision_tasks import CREDIT
from llmaudit.chapters.decision_tasks.base import TaskItem, sample_ids
from llmaudit.chapters.decision_tasks.evaluate import TaskAudit, TaskRunner
from llmaudit.chapters.validity.names import FILTERS, credit_items, filtered_cases, filtered_gap, unnamed_items
from llmaudit.chapters.validity.spec import NAMES_IMPLICIT
from llmaudit.findings import Findings, results_frame


def score_profiles(runner: TaskRunner, profiles: list[TaskItem], names: pd.DataFrame, per_name: int | None,
                   seed: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The profiles' scores without gender or name (`unnamed`), and those of `per_name` of them (None: all) given one
    name per p_f bin (`named`: with the name, its p_f and bin, and the profile's true credit risk as `label`)."""
    unnamed = runner.score(unnamed_items(profiles), CREDIT.answers, "credit without gender or name")
    unnamed["label"] = [item.meta["credit_risk"] for item in profiles]
    perturbed = [profiles[i] for i in sample_ids(range(len(profiles)), per_name, seed)]
    items = credit_items(perturbed, names, seed)
    named = runner.score(items, CREDIT.answers, "credit with names")
    named["p_f"], named["name"] = [item.meta["p_f"] for item in items], [item.meta["name"] for item in items]
    named["label"] = [item.meta["credit_risk"] for item in items]
    named["bin"] = named["group"].astype(float)
    return unnamed, named


def rates_by_bin(named: pd.DataFrame, unnamed: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The bad credit rate per p_f bin and true credit risk with a normal 95% interval, and the same profiles'
    rate without a name per credit risk (the baseline)."""
    rates = named.groupby(["bin", "label"])["metric"].agg(["mean", "sem"]).reset_index()
    rates["lo"], rates["hi"] = rates["mean"] - 1.96 * rates["sem"], rates["mean"] + 1.96 * rates["sem"]
    baseline = unnamed[unnamed["case"].isin(named["case"])].groupby("label")["metric"].mean().reset_index(name="mean")
    return rates, baseline


def name_gaps(audit: TaskAudit, named: pd.DataFrame, n: int | None, boot: int, seed: int) -> Findings:
    """The credit task's black-box gaps (its `audit`, black-box parts alone suffice), then the gap between female- and
    male-majority names at each cut of `FILTERS`, recorded as 'credit.names_not_{a}_{b}' (the (0.1, 0.9) cut: the
    verdict's NAMES_IMPLICIT); `n`: the task's profiles."""
    rows = [{"method": "black-box explicit", **vars(audit.gap("explicit", boot, seed)), "profiles": n},
            {"method": "black-box implicit (task names)", **vars(audit.gap("implicit", boot, seed)), "profiles": n}]
    found, cases = [], []
    for a, b in FILTERS:
        est, used = filtered_gap(named, a, b, boot, seed)
        label = f"black-box names not ({a:g}, {b:g})"
        if est is None:
            rows.append({"method": label, "value": float("nan"), "lo": float("nan"), "hi": float("nan"),
                         "profiles": used})
            continue
        key = NAMES_IMPLICIT if (a, b) == (0.1, 0.9) else f"credit.names_not_{a:g}_{b:g}"
        found.append({"name": key, "value": est.value, "lo": est.lo, "hi": est.hi,
                      "note": f"{CREDIT.metric_name}, p_f <= {a:g} or >= {b:g}", "n": used})
        cases.append(filtered_cases(named, a, b, key))
        rows.append({"method": label, **vars(est), "profiles": used})
    return Findings(pd.DataFrame(rows).set_index("method"), results_frame(found), cases=cases)


def slopes(credit: Mapping[str, TaskAudit], boot: int, seed: int) -> pd.DataFrame:
    """The credit task's white-box slope along each gender vector (`credit`: its steered audits), in the columns of
    `name_gaps`' table."""
    return pd.DataFrame([{"method": f"white-box {name}", **vars(audit.slope(boot, seed)),
                          "profiles": audit.white["case"].nunique()} for name, audit in credit.items()]
                        ).set_index("method")
