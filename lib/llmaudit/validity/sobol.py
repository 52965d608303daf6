"""First-order Sobol' indices S_i = Var(E[y | x_i]) / Var(y) estimated from a given table of audited cases:
each input is discretised into levels, and S_i is the bias-corrected between-level share of the variance of y
(epsilon squared), so an input with no effect scores about 0 rather than (levels - 1) / cases."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

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
    frame: pd.DataFrame, inputs: Sequence[str], output: str, bins: int
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """The output as floats and each input's level codes (missing values are a level of their own), checked."""
    missing = [name for name in [*inputs, output] if name not in frame.columns]
    if missing:
        raise AuditError(f"column(s) {missing} not in the frame; available: {list(frame.columns)}")
    if len(frame) < 3:
        raise AuditError(f"need at least 3 cases for Sobol' indices, got {len(frame)}: raise the task size")
    codes = {name: pd.factorize(discretise(frame[name], bins), use_na_sentinel=False)[0] for name in inputs}
    for name, levels in codes.items():
        if levels.max() + 1 >= len(frame):
            raise AuditError(f"input {name!r} has a different level in every case: use fewer bins or coarser levels")
    return frame[output].to_numpy(dtype=float), codes


def first_order(frame: pd.DataFrame, inputs: Sequence[str], output: str, bins: int = 5) -> pd.Series:
    """Bias-corrected first-order index of each input: the share of Var(output) its levels explain on their own."""
    y, codes = _levels(frame, inputs, output, bins)
    return pd.Series({name: _epsilon_squared(y, levels) for name, levels in codes.items()}, dtype=float)


def first_order_ci(
    frame: pd.DataFrame,
    inputs: Sequence[str],
    output: str,
    *,
    bins: int = 5,
    n_boot: int = 1000,
    seed: int = 0,
    alpha: float = 0.05,
) -> pd.DataFrame:
    """First-order indices (value) with (1 - alpha) percentile intervals (lo, hi) from resampling cases."""
    y, codes = _levels(frame, inputs, output, bins)
    resamples = np.random.default_rng(seed).integers(0, len(y), size=(n_boot, len(y)))
    boot = np.array([[_epsilon_squared(y[rows], levels[rows]) for levels in codes.values()] for rows in resamples])
    lo, hi = np.quantile(boot, [alpha / 2, 1 - alpha / 2], axis=0)
    value = [_epsilon_squared(y, levels) for levels in codes.values()]
    return pd.DataFrame({"value": value, "lo": lo, "hi": hi}, index=list(codes))
