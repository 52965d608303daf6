"""Estimates with confidence intervals for the audit's headline numbers: group gaps (black-box bias), sweep
slopes (white-box sensitivity), and the invariance verdict |S| <= epsilon. Intervals come from a bootstrap
over the audited cases (profiles, questions, utterance pairs), which are the unit the task samples."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import scipy.stats

from llmaudit.errors import AuditError


@dataclass(frozen=True)
class Estimate:
    """A point estimate with a (1 - alpha) bootstrap percentile interval."""

    value: float
    lo: float
    hi: float


def bootstrap_mean(values: np.ndarray, n_boot: int, seed: int, alpha: float = 0.05) -> Estimate:
    """Mean of per-case values with a percentile interval from resampling cases."""
    if len(values) < 2:
        raise AuditError(f"need at least 2 cases for a confidence interval, got {len(values)}: raise the task size")
    rng = np.random.default_rng(seed)
    means = values[rng.integers(0, len(values), size=(n_boot, len(values)))].mean(1)
    lo, hi = np.quantile(means, [alpha / 2, 1 - alpha / 2])
    return Estimate(float(values.mean()), float(lo), float(hi))


def group_gap(
    frame: pd.DataFrame, a: str, b: str, n_boot: int = 2000, seed: int = 0, alpha: float = 0.05
) -> Estimate:
    """mean metric(group a) - mean metric(group b), paired by case (columns case, group, metric)."""
    wide = frame.pivot_table(index="case", columns="group", values="metric")
    missing = {a, b} - set(wide.columns)
    if missing:
        raise AuditError(f"no items of group {sorted(missing)} to compare: check the task variant")
    return bootstrap_mean((wide[a] - wide[b]).dropna().to_numpy(), n_boot, seed, alpha)


def case_slopes(frame: pd.DataFrame) -> pd.Series:
    """OLS slope of metric on lambda within each case (columns case, lam, metric)."""
    lam = frame["lam"] - frame.groupby("case")["lam"].transform("mean")
    y = frame["metric"] - frame.groupby("case")["metric"].transform("mean")
    parts = pd.DataFrame({"case": frame["case"], "xy": lam * y, "xx": lam * lam}).groupby("case").sum()
    return parts["xy"] / parts["xx"]


def sweep_slope(frame: pd.DataFrame, n_boot: int = 2000, seed: int = 0, alpha: float = 0.05) -> Estimate:
    """Sensitivity: the OLS slope of metric on lambda over all cases (every case sees the same lambda grid, so it
    is the mean of the per-case slopes), with a bootstrap interval over cases."""
    if frame["lam"].nunique() < 2:
        raise AuditError("a sweep needs at least two lambda values")
    return bootstrap_mean(case_slopes(frame).to_numpy(), n_boot, seed, alpha)


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


def conflict(a: Estimate, b: Estimate) -> bool:
    """Two measurements of one bias conflict when both intervals exclude zero with opposite signs."""
    return (a.lo > 0 and b.hi < 0) or (a.hi < 0 and b.lo > 0)
