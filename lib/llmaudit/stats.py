"""Estimates with confidence intervals for the audit's headline numbers: group gaps (black-box bias), sweep
slopes (white-box sensitivity), and the invariance verdict |S| <= epsilon, with what reading many verdicts needs:
the cases a decisive verdict would take, the p-value of a fail and Holm's correction across a report; and the
paired difference of two models' scores on shared units (`llmaudit compare`). Intervals
come from a bootstrap over the audited cases (profiles, questions, utterance pairs), the unit the task samples, or
over whole clusters of them (a template, a name, a case pair) where cases within a cluster are not independent."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import scipy.stats

from llmaudit.errors import AuditError

_CHUNK = 200  # paired bootstrap resamples drawn at once (bounds memory for many units)


@dataclass(frozen=True)
class Estimate:
    """A point estimate with a (1 - alpha) bootstrap percentile interval."""

    value: float
    lo: float
    hi: float


def t_interval(values: Sequence[float] | np.ndarray | pd.Series, alpha: float = 0.05) -> Estimate:
    """The mean of `values` with its (1 - alpha) Student t-interval (n - 1 dof; NaN bounds with one value), the
    interval the papers draw over attributes or seeds."""
    x = np.asarray(values, dtype=float)
    mean = float(x.mean())
    if len(x) < 2:
        return Estimate(mean, math.nan, math.nan)
    half = float(scipy.stats.t.ppf(1 - alpha / 2, len(x) - 1) * x.std(ddof=1) / math.sqrt(len(x)))
    return Estimate(mean, mean - half, mean + half)


def bootstrap_mean(
    values: np.ndarray, n_boot: int, seed: int, alpha: float = 0.05, clusters: np.ndarray | None = None
) -> Estimate:
    """Mean of per-case values with a percentile interval from resampling cases, or whole clusters (`clusters`:
    one id per value) so that correlated cases of one cluster are drawn together and the interval stays honest.
    Computed in float64, as the interval is (float32 model outputs summed in float32 would move the mean's last
    digits with their order)."""
    values = np.asarray(values, dtype=np.float64)
    if clusters is None:
        clusters = np.arange(len(values))
    if len(clusters) != len(values):
        raise AuditError(f"need one cluster id per value, got {len(clusters)} ids for {len(values)} values")
    ids, index = np.unique(np.asarray(clusters), return_inverse=True)
    if len(ids) < 2:
        raise AuditError(f"need at least 2 cases (or clusters) for a confidence interval, got {len(ids)}: "
                         "raise the task size")
    sums, sizes = np.bincount(index, weights=values), np.bincount(index)
    draws = np.random.default_rng(seed).integers(0, len(ids), size=(n_boot, len(ids)))
    means = sums[draws].sum(1) / sizes[draws].sum(1)
    lo, hi = np.quantile(means, [alpha / 2, 1 - alpha / 2])
    return Estimate(float(values.mean()), float(lo), float(hi))


def case_clusters(frame: pd.DataFrame, clusters: np.ndarray | None, cases: pd.Index) -> np.ndarray | None:
    """The cluster of each of `cases`, from one cluster id per row of `frame` (column case); a case must lie
    within one cluster, since the bootstrap resamples whole cases."""
    if clusters is None:
        return None
    per_case = pd.Series(np.asarray(clusters), index=frame.index).groupby(frame["case"])
    if (per_case.nunique() > 1).any():
        raise AuditError("a case spans several clusters: give every row of a case the same cluster id")
    return per_case.first().reindex(cases).to_numpy()


def paired_gaps(frame: pd.DataFrame, a: str, b: str) -> pd.Series:
    """Per case (index): metric(group a) - metric(group b) (columns case, group, metric); cases lacking a group's
    metric are left out (a sampled read has none where no answer named an answer word)."""
    missing = {a, b} - set(frame["group"])
    if missing:
        raise AuditError(f"no items of group {sorted(missing)} to compare: check the task variant")
    wide = frame.pivot_table(index="case", columns="group", values="metric").reindex(columns=[a, b])
    return (wide[a] - wide[b]).dropna()


def group_gap(
    frame: pd.DataFrame, a: str, b: str, n_boot: int = 2000, seed: int = 0, alpha: float = 0.05,
    clusters: np.ndarray | None = None,
) -> Estimate:
    """mean metric(group a) - mean metric(group b), paired by case (columns case, group, metric); `clusters` (one
    id per row) resamples clusters of cases instead of cases."""
    gaps = paired_gaps(frame, a, b)
    return bootstrap_mean(gaps.to_numpy(), n_boot, seed, alpha, case_clusters(frame, clusters, gaps.index))


def case_slopes(frame: pd.DataFrame) -> pd.Series:
    """OLS slope of metric on lambda within each case (columns case, lam, metric), over the rows that have a metric
    (a sampled read has none where no answer named an answer word); a case with its metric at fewer than two
    lambdas has no slope and is left out."""
    frame = frame.dropna(subset=["metric"])
    lam = frame["lam"] - frame.groupby("case")["lam"].transform("mean")
    y = frame["metric"] - frame.groupby("case")["metric"].transform("mean")
    parts = pd.DataFrame({"case": frame["case"], "xy": lam * y, "xx": lam * lam}).groupby("case").sum()
    return (parts["xy"] / parts["xx"])[parts["xx"] > 0]


def sweep_slope(
    frame: pd.DataFrame, n_boot: int = 2000, seed: int = 0, alpha: float = 0.05, clusters: np.ndarray | None = None
) -> Estimate:
    """Sensitivity: the OLS slope of metric on lambda over all cases (every case sees the same lambda grid, so it
    is the mean of the per-case slopes), with a bootstrap interval over cases, or over clusters of cases
    (`clusters`: one id per row)."""
    if frame["lam"].nunique() < 2:
        raise AuditError("a sweep needs at least two lambda values")
    slopes = case_slopes(frame)
    return bootstrap_mean(slopes.to_numpy(), n_boot, seed, alpha, case_clusters(frame, clusters, slopes.index))


def pearson(x: np.ndarray, y: np.ndarray, alpha: float = 0.05) -> Estimate:
    """Pearson correlation with the Fisher-z interval tanh(atanh(r) -+ z / sqrt(n - 3))."""
    if len(x) < 4:
        raise AuditError(f"need at least 4 pairs for a correlation interval, got {len(x)}")
    r = float(np.corrcoef(x, y)[0, 1])
    half = float(scipy.stats.norm.ppf(1 - alpha / 2)) / np.sqrt(len(x) - 3)
    z = np.arctanh(np.clip(r, -1 + 1e-12, 1 - 1e-12))
    return Estimate(r, float(np.tanh(z - half)), float(np.tanh(z + half)))


def verdict(estimate: Estimate, epsilon: float) -> str:
    """Invariance test |S| <= epsilon: pass when the whole interval is inside, fail when it is wholly outside,
    inconclusive when it straddles a threshold."""
    if -epsilon <= estimate.lo and estimate.hi <= epsilon:
        return "pass"
    if estimate.lo > epsilon or estimate.hi < -epsilon:
        return "fail"
    return "inconclusive"


def dependence_verdict(estimate: Estimate, epsilon: float) -> str:
    """Dependence test |S| >= epsilon (main paper §3.4), read with the same interval logic: pass when the whole
    interval lies outside [-epsilon, epsilon], fail when it lies inside, inconclusive when it straddles a threshold."""
    return {"pass": "fail", "fail": "pass"}.get(found := verdict(estimate, epsilon), found)


def conflict(a: Estimate, b: Estimate) -> bool:
    """Two measurements of one bias conflict when both intervals exclude zero with opposite signs."""
    return (a.lo > 0 and b.hi < 0) or (a.hi < 0 and b.lo > 0)


Z95 = float(scipy.stats.norm.ppf(0.975))  # 1.959964: half-width of a 95% normal interval in standard errors


def cases_needed(estimate: Estimate, epsilon: float, n: int) -> float:
    """Cases that would make the verdict decisive at the observed variance: the half-width h shrinks as 1/sqrt(n),
    and a pass needs h' <= epsilon - |S|, a fail h' < |S| - epsilon; infinite when |S| == epsilon, or so close to it
    that the count passes what a float holds (epsilon 1e-300 and a score of exactly 0)."""
    margin = abs(epsilon - abs(estimate.value))
    if margin == 0:
        return math.inf
    try:
        needed = n * ((estimate.hi - estimate.lo) / 2 / margin) ** 2
    except OverflowError:
        return math.inf
    return needed if math.isinf(needed) else math.ceil(needed)


def fail_pvalue(estimate: Estimate, epsilon: float) -> float:
    """Two-sided p-value of |S| > epsilon from the 95% interval read as normal, its standard error the half-width
    on the side towards 0 over 1.96 (that of a symmetric interval; an interval clipped to the range its score can
    take keeps that side), capped at 1: below 0.05 exactly when the interval lies wholly outside [-epsilon,
    epsilon]."""
    inner = estimate.value - estimate.lo if estimate.value >= 0 else estimate.hi - estimate.value
    excess, se = abs(estimate.value) - epsilon, inner / Z95
    if se <= 0:
        return 0.0 if excess > 0 else 1.0
    return min(1.0, 2 * float(scipy.stats.norm.cdf(-excess / se)))


def holm(pvalues: Sequence[float]) -> np.ndarray:
    """Holm's step-down adjusted p-values ("A simple sequentially rejective multiple test procedure", Holm 1979):
    the k-th smallest p times (m - k + 1), made non-decreasing and capped at 1; a hypothesis is rejected at
    family-wise level alpha when its adjusted p-value is <= alpha."""
    p = np.asarray(pvalues, dtype=float)
    order = np.argsort(p, kind="stable")
    scaled = p[order] * (len(p) - np.arange(len(p)))
    adjusted = np.empty_like(p)
    adjusted[order] = np.minimum(1.0, np.maximum.accumulate(scaled))
    return adjusted


def paired_bootstrap(a: np.ndarray, b: np.ndarray, n_boot: int, seed: int,
                     alpha: float = 0.05) -> tuple[Estimate, Estimate, Estimate]:
    """D = |mean a| - |mean b| over paired units (a[i], b[i] of one unit: two models' values, `llmaudit compare`),
    with a percentile interval from resampling units jointly, `_CHUNK` resamples at a time; also each side's mean
    with its interval from the same resamples."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if len(a) != len(b):
        raise AuditError(f"paired values need one value per unit on each side, got {len(a)} and {len(b)}")
    if len(a) < 2:
        raise AuditError(f"need at least 2 shared units for an interval, got {len(a)}")
    rng = np.random.default_rng(seed)
    means_a, means_b = np.empty(n_boot), np.empty(n_boot)
    for start in range(0, n_boot, _CHUNK):
        draws = rng.integers(0, len(a), size=(min(_CHUNK, n_boot - start), len(a)))
        means_a[start:start + len(draws)] = a[draws].mean(1)
        means_b[start:start + len(draws)] = b[draws].mean(1)
    q = [alpha / 2, 1 - alpha / 2]

    def estimate(value: float, draws: np.ndarray) -> Estimate:
        lo, hi = np.quantile(draws, q)
        return Estimate(float(value), float(lo), float(hi))

    d = estimate(abs(a.mean()) - abs(b.mean()), np.abs(means_a) - np.abs(means_b))
    return d, estimate(a.mean(), means_a), estimate(b.mean(), means_b)
