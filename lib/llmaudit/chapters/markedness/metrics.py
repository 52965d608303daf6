"""Per-group false positive rates of a three-way sentiment classifier and their gaps (paper 004, section 3.2).

Negative-Sentiment FPR: share of positive or neutral sentences classified negative; Positive-Sentiment FPR: share
of negative or neutral sentences classified positive. The gap of group X in one run is d(X) = FPR(X) - the mean FPR
over the groups; runs (demonstration seeds) give the 95% t-interval of the mean gap (the paper's design: "mean gaps
and 95% confidence intervals ... based on five runs", §3.2), clipped to the values a gap can take (`gap_bound`): a
t-interval on few runs, one degree of freedom at two, runs far past them. The gap span is the largest minus the
smallest mean gap. The input is a plain table so that predictions from any tool can be scored.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pandas as pd
import scipy.stats

from llmaudit.errors import AuditError
from llmaudit.records import case_records

LABELS = ("negative", "neutral", "positive")
GROUPS = ("american_indian", "asian", "african_american", "hispanic", "pacific_islander", "white")
KINDS = ("negative_fpr", "positive_fpr")


def _require(table: pd.DataFrame, columns: Iterable[str], what: str) -> None:
    """One-line AuditError naming the columns `table` lacks."""
    missing = [c for c in columns if c not in table.columns]
    if missing:
        raise AuditError(f"{what}: missing columns {missing} (have {list(table.columns)}): add or rename them")


def _flags(table: pd.DataFrame) -> pd.DataFrame:
    """Per sentence and kind: 1 for a false positive, 0 for a correct rejection, NaN when the gold label is the
    kind's own (not eligible for that FPR)."""
    return pd.DataFrame({kind: (table["pred"] == kind.removesuffix("_fpr")).astype(float)
                         .where(table["gold"] != kind.removesuffix("_fpr")) for kind in KINDS})


def false_positive_rates(table: pd.DataFrame) -> pd.DataFrame:
    """Per (run, group): negative_fpr, positive_fpr (NaN with no eligible sentence), accuracy and n, from gold/pred;
    a sentence whose answer named no label (pred missing) is no prediction and leaves the rates."""
    _require(table, ("group", "gold", "pred", "run"), "predictions")
    if table.empty:
        raise AuditError("predictions: the table has no rows: score some examples first")
    table = table[table["pred"].notna()]
    if table.empty:
        raise AuditError("predictions: no answer named a label, so there is no rate: leave out the rows whose pred "
                         "is missing only where some remain")
    for column in ("gold", "pred"):
        unknown = sorted(set(table[column].astype(str)) - set(LABELS))
        if unknown:
            raise AuditError(f"predictions: unknown {column} labels {unknown}: use only {', '.join(LABELS)}")
    flags = _flags(table).assign(run=table["run"], group=table["group"],
                                 accuracy=(table["gold"] == table["pred"]).astype(float))
    rates = flags.groupby(["run", "group"]).agg(
        negative_fpr=("negative_fpr", "mean"),
        positive_fpr=("positive_fpr", "mean"),
        accuracy=("accuracy", "mean"),
        n=("accuracy", "size"),
    )
    return rates.reset_index()


def fpr_gaps(rates: pd.DataFrame) -> pd.DataFrame:
    """Long table (run, group, kind, fpr, gap): each group's FPR minus the run's mean FPR over groups, both kinds.
    A gap compares a group with all the others, so a run in which some group has no FPR of a kind (no parsed answer,
    or no eligible sentence) gives every group a missing gap of that kind: the run is left out of that kind's
    interval rather than compared against a different set of groups."""
    _require(rates, ("run", "group", *KINDS), "rates")
    grid = pd.MultiIndex.from_product([rates["run"].unique(), rates["group"].unique()], names=["run", "group"])
    full = rates.set_index(["run", "group"]).reindex(grid).reset_index()
    long = full.melt(id_vars=["run", "group"], value_vars=list(KINDS), var_name="kind", value_name="fpr")
    by_run = long.groupby(["run", "kind"])["fpr"]
    complete = by_run.transform(lambda fpr: fpr.notna().all())
    long["gap"] = (long["fpr"] - by_run.transform("mean")).where(complete)
    return long


def gap_bound(groups: int) -> float:
    """The largest |d(X)| among `groups` groups: X's FPR 1 and every other's 0 gives 1 - 1/groups (5/6 for six)."""
    return 1 - 1 / groups


def summarise_gaps(gaps: pd.DataFrame, alpha: float = 0.05) -> pd.DataFrame:
    """Per (group, kind): mean gap over the runs that have one, with a (1 - alpha) t-interval (n_runs - 1 dof;
    NaN with one run; mean and interval NaN with none) clipped to +-`gap_bound` of the groups compared (clipping
    keeps its coverage: the gap never lies beyond), `bound` and `clipped`, whether it was."""
    _require(gaps, ("run", "group", "kind", "gap"), "gaps")
    summary = gaps.groupby(["group", "kind"])["gap"].agg(mean="mean", sd="std", n_runs="count").reset_index()
    # One run: sd and the t quantile at 0 dof are NaN, and so is the interval.
    half = scipy.stats.t.ppf(1 - alpha / 2, summary["n_runs"] - 1) * summary["sd"] / np.sqrt(summary["n_runs"])
    bound = gap_bound(gaps["group"].nunique())
    summary["lo"] = (summary["mean"] - half).clip(lower=-bound)
    summary["hi"] = (summary["mean"] + half).clip(upper=bound)
    summary["bound"] = bound
    summary["clipped"] = (summary["mean"] - half < -bound) | (summary["mean"] + half > bound)
    return summary[["group", "kind", "mean", "lo", "hi", "n_runs", "bound", "clipped"]]


def gap_span(summary: pd.DataFrame) -> pd.Series:
    """Per kind: largest minus smallest mean gap over groups, how far the model is from group invariance."""
    _require(summary, ("kind", "mean"), "summary")
    means = summary.groupby("kind")["mean"]
    return (means.max() - means.min()).rename("gap_span")


def fpr_gap_cases(table: pd.DataFrame, test: str, kind: str, group: str) -> pd.DataFrame:
    """Case records (unit: the run, i.e. the demonstration seed) of `group`'s `kind` gap: every sentence of the
    run, each with its group, its false-positive flag as the metric (null when not eligible) and the run's gap of
    `group` as the value, so that the mean value over runs is the gap `summarise_gaps` reports. table: run, group,
    gold, pred, text, prompt, mass."""
    _require(table, ("run", "group", "gold", "pred", "text", "prompt", "mass"), "predictions")
    items = table.assign(run=table["run"].astype(str), metric=_flags(table)[kind])
    gaps = fpr_gaps(false_positive_rates(items))
    chosen = gaps[(gaps["group"] == group) & (gaps["kind"] == kind)].set_index("run")["gap"]
    return case_records(items, test, chosen, unit="run", group=items["group"].astype(str),
                        extra=("text", "gold", "pred"))
