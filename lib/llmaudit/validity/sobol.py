"""First-order Sobol' indices S_i = Var(E[y | x_i]) / Var(y) estimated from a given table of audited cases:
each input is discretised into levels, and S_i is the bias-corrected between-level share of the variance of y
(epsilon squared), so an input with no effect scores about 0 rather than (levels - 1) / cases."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import scipy.stats

from llmaudit.errors import AuditError


def discretise(column: pd.Series, bins: int) -> pd.Series:
    """Levels to condition on: categories as they are, numbers with many values cut into equal-count bins."""
    kind = column.dtype
    if not pd.api.types.is_numeric_dtype(kind) or pd.api.types.is_bool_dtype(kind) or column.nunique() <= bins:
        return column.astype("category")
    return pd.qcut(column, bins, duplicates="drop")


def _epsilon_squared(y: np.ndarray, codes: np.ndarray) -> float:
    """(SS_between - (k-1) SS_within / (n-k)) / SS_total over the levels in codes, at least 0; 0 for constant y."""
    centred = y - y.mean()
    ss_total = centred @ centred
    if ss_total == 0:
        return 0.0
    counts = np.bincount(codes)
    seen = counts > 0
    ss_between = (np.bincount(codes, weights=centred)[seen] ** 2 / counts[seen]).sum()
    n, k = len(y), seen.sum()
    return max(0.0, (ss_between - (k - 1) * (ss_total - ss_between) / (n - k)) / ss_total)


def _levels(
    frame: pd.DataFrame, inputs: Sequence[str], output: str, bins: int, average_over: str | None
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """The output as a (groups, cases) float array (one group unless `average_over`) and each input's level codes
    per case (missing values are a level of their own), checked."""
    missing = [name for name in [*inputs, output, *([average_over] if average_over else [])] if name not in frame]
    if missing:
        raise AuditError(f"column(s) {missing} not in the frame; available: {list(frame.columns)}")
    groups = [g for _, g in frame.groupby(average_over, sort=True)] if average_over else [frame]
    first = groups[0]
    if any(len(g) != len(first) or not g[list(inputs)].equals(first[list(inputs)].set_axis(g.index)) for g in groups):
        raise AuditError(f"every '{average_over}' group must hold the same cases in the same order")
    if len(first) < 3:
        raise AuditError(f"need at least 3 cases for Sobol' indices, got {len(first)}: raise the task size")
    codes = {name: pd.factorize(discretise(first[name], bins), use_na_sentinel=False)[0] for name in inputs}
    return np.stack([g[output].to_numpy(dtype=float) for g in groups]), codes


def _index(y: np.ndarray, levels: np.ndarray) -> float:
    """The mean over groups (rows of y) of the bias-corrected index; NaN where every case has its own level
    (nothing to average within a level: too few cases for this input)."""
    if len(np.unique(levels)) >= len(levels):
        return float("nan")
    return float(np.mean([_epsilon_squared(row, levels) for row in y]))


def first_order(
    frame: pd.DataFrame, inputs: Sequence[str], output: str, bins: int = 5, average_over: str | None = None
) -> pd.Series:
    """Bias-corrected first-order index of each input: the share of Var(output) its levels explain on their own;
    with `average_over` (e.g. the steering coefficient), the mean of the indices computed within each group."""
    y, codes = _levels(frame, inputs, output, bins, average_over)
    return pd.Series({name: _index(y, levels) for name, levels in codes.items()}, dtype=float)


def first_order_ci(
    frame: pd.DataFrame,
    inputs: Sequence[str],
    output: str,
    *,
    bins: int = 5,
    average_over: str | None = None,
    n_boot: int = 1000,
    seed: int = 0,
    alpha: float = 0.05,
) -> pd.DataFrame:
    """First-order indices (value) with (1 - alpha) percentile intervals (lo, hi) from resampling cases (the
    same resampled cases in every group)."""
    y, codes = _levels(frame, inputs, output, bins, average_over)
    resamples = np.random.default_rng(seed).integers(0, y.shape[1], size=(n_boot, y.shape[1]))
    boot = np.array([[_index(y[:, rows], levels[rows]) for levels in codes.values()] for rows in resamples])
    value = np.array([_index(y, levels) for levels in codes.values()])
    lo, hi = np.nanquantile(boot[:, np.isfinite(value)], [alpha / 2, 1 - alpha / 2], axis=0)
    table = pd.DataFrame({"value": value, "lo": np.nan, "hi": np.nan}, index=list(codes))
    table.loc[np.isfinite(value), ["lo", "hi"]] = np.column_stack([lo, hi])
    return table


def cramers_v(a: pd.Series, b: pd.Series) -> float:
    """Association of two categorical variables in [0, 1]: sqrt(chi2 / (n (min(rows, cols) - 1)))."""
    table = pd.crosstab(a, b).to_numpy()
    if min(table.shape) < 2:
        return 0.0
    chi2 = scipy.stats.chi2_contingency(table, correction=False)[0]
    return float(np.sqrt(chi2 / (table.sum() * (min(table.shape) - 1))))


def associations(cases: pd.DataFrame, inputs: Sequence[str], bins: int) -> pd.DataFrame:
    """Cramer's V of every pair of (discretised) inputs, strongest first: the dependence that first-order indices,
    which assume independent inputs, attribute to each variable of a pair."""
    levels = {name: discretise(cases[name], bins) for name in inputs}
    rows = [(a, b, cramers_v(levels[a], levels[b])) for i, a in enumerate(inputs) for b in inputs[i + 1:]]
    return pd.DataFrame(rows, columns=["variable", "with", "cramers_v"]).sort_values("cramers_v", ascending=False,
                                                                                   ignore_index=True)
