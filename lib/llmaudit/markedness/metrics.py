"""Per-group false positive rates of a three-way sentiment classifier and their gaps (paper 004, section 3.2).

Negative-Sentiment FPR: share of positive or neutral sentences classified negative; Positive-Sentiment FPR: share
of negative or neutral sentences classified positive. The gap of group X in one run is d(X) = FPR(X) - the mean FPR
over the groups; runs (demonstration seeds) give the 95% t-interval of the mean gap, and the gap span is the
largest minus the smallest mean gap. The input is a plain table so that predictions from any tool can be scored.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pandas as pd
import scipy.stats

from llmaudit.errors import AuditError

LABELS = ("negative", "neutral", "positive")
GROUPS = ("american_indian", "asian", "african_american", "hispanic", "pacific_islander", "white")
KINDS = ("negative_fpr", "positive_fpr")


def _require(table: pd.DataFrame, columns: Iterable[str], what: str) -> None:
    """One-line AuditError naming the columns `table` lacks."""
    missing = [c for c in columns if c not in table.columns]
    if missing:
        raise AuditError(f"{what}: missing columns {missing} (have {list(table.columns)}): add or rename them")


def false_positive_rates(table: pd.DataFrame) -> pd.DataFrame:
    """Per (run, group): negative_fpr, positive_fpr (NaN with no eligible sentence), accuracy and n, from gold/pred."""
    _require(table, ("group", "gold", "pred", "run"), "predictions")
    if table.empty:
        raise AuditError("predictions: the table has no rows: score some examples first")
    for column in ("gold", "pred"):
        unknown = sorted(set(table[column].astype(str)) - set(LABELS))
        if unknown:
            raise AuditError(f"predictions: unknown {column} labels {unknown}: use only {', '.join(LABELS)}")
    said_negative = (table["pred"] == "negative").astype(float)
    said_positive = (table["pred"] == "positive").astype(float)
    flags = pd.DataFrame({
        "run": table["run"],
        "group": table["group"],
        "negative_fpr": said_negative.where(table["gold"] != "negative"),  # NaN: not eligible for this FPR
        "positive_fpr": said_positive.where(table["gold"] != "positive"),
        "accuracy": (table["gold"] == table["pred"]).astype(float),
    })
    rates = flags.groupby(["run", "group"]).agg(
        negative_fpr=("negative_fpr", "mean"),
        positive_fpr=("positive_fpr", "mean"),
        accuracy=("accuracy", "mean"),
        n=("accuracy", "size"),
    )
    return rates.reset_index()


def fpr_gaps(rates: pd.DataFrame) -> pd.DataFrame:
    """Long table (run, group, kind, fpr, gap): each group's FPR minus the run's mean FPR over groups, both kinds."""
    _require(rates, ("run", "group", *KINDS), "rates")
    groups_per_run = rates.groupby("run")["group"].agg(frozenset)
    if groups_per_run.nunique() > 1:
        raise AuditError("rates: runs cover different groups, so gaps are not comparable: score all groups per run")
    long = rates.melt(id_vars=["run", "group"], value_vars=list(KINDS), var_name="kind", value_name="fpr")
    long["gap"] = long["fpr"] - long.groupby(["run", "kind"])["fpr"].transform("mean")
    return long


def summarise_gaps(gaps: pd.DataFrame, alpha: float = 0.05) -> pd.DataFrame:
    """Per (group, kind): mean gap over runs with a (1 - alpha) t-interval (n_runs - 1 dof; NaN with one run)."""
    _require(gaps, ("run", "group", "kind", "gap"), "gaps")
    summary = gaps.groupby(["group", "kind"])["gap"].agg(mean="mean", sd="std", n_runs="count").reset_index()
    # One run: sd and the t quantile at 0 dof are NaN, and so is the interval.
    half = scipy.stats.t.ppf(1 - alpha / 2, summary["n_runs"] - 1) * summary["sd"] / np.sqrt(summary["n_runs"])
    summary["lo"] = summary["mean"] - half
    summary["hi"] = summary["mean"] + half
    return summary[["group", "kind", "mean", "lo", "hi", "n_runs"]]


def gap_span(summary: pd.DataFrame) -> pd.Series:
    """Per kind: largest minus smallest mean gap over groups, how far the model is from group invariance."""
    _require(summary, ("kind", "mean"), "summary")
    means = summary.groupby("kind")["mean"]
    return (means.max() - means.min()).rename("gap_span")
