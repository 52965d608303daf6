"""Estimates on synthetic data with known answers."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from llmaudit.errors import AuditError
from llmaudit.stats import Estimate, case_slopes, group_gap, sweep_slope, verdict

LAMBDAS = np.round(np.linspace(-1, 1, 11), 1)


def sweep_frame(slope: float, cases: int = 200, noise: float = 0.02, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    for case in range(cases):
        intercept, own = rng.uniform(0.2, 0.8), slope + rng.normal(0, 0.01)
        for lam in LAMBDAS:
            rows.append({"case": str(case), "lam": lam, "metric": intercept + own * lam + rng.normal(0, noise)})
    return pd.DataFrame(rows)


def test_sweep_slope_recovers_known_slope_and_covers_it() -> None:
    est = sweep_slope(sweep_frame(0.05))
    assert abs(est.value - 0.05) < 0.003
    assert est.lo < 0.05 < est.hi and est.hi - est.lo < 0.01


def test_pooled_slope_equals_numpy_polyfit() -> None:
    frame = sweep_frame(-0.1, cases=30)
    pooled = np.polyfit(frame["lam"], frame["metric"] - frame.groupby("case")["metric"].transform("mean"), 1)[0]
    assert sweep_slope(frame).value == pytest.approx(pooled, abs=1e-12)
    one = frame[frame["case"] == "0"]
    assert case_slopes(frame)["0"] == pytest.approx(np.polyfit(one["lam"], one["metric"], 1)[0], abs=1e-12)


def test_group_gap_is_paired_mean_difference() -> None:
    frame = pd.DataFrame(
        {"case": ["1", "1", "2", "2", "3", "3"], "group": ["f", "m"] * 3, "metric": [0.5, 0.4, 0.9, 0.6, 0.2, 0.3]}
    )
    est = group_gap(frame, "f", "m")
    assert est.value == pytest.approx((0.1 + 0.3 - 0.1) / 3)
    assert est.lo <= est.value <= est.hi
    with pytest.raises(AuditError):
        group_gap(frame, "f", "x")


def test_verdicts() -> None:
    assert verdict(Estimate(0.001, -0.002, 0.004), 0.01) == "pass"
    assert verdict(Estimate(0.05, 0.03, 0.07), 0.01) == "fail"
    assert verdict(Estimate(-0.05, -0.07, -0.03), 0.01) == "fail"
    assert verdict(Estimate(0.01, 0.0, 0.02), 0.01) == "inconclusive"


def test_single_case_is_an_error() -> None:
    with pytest.raises(AuditError):
        sweep_slope(sweep_frame(0.1, cases=1))


def test_conflict_needs_two_significant_opposite_signs() -> None:
    from llmaudit.stats import conflict

    assert conflict(Estimate(0.1, 0.05, 0.15), Estimate(-0.1, -0.15, -0.05))
    assert not conflict(Estimate(0.1, 0.05, 0.15), Estimate(-0.1, -0.15, 0.01))
    assert not conflict(Estimate(0.1, 0.05, 0.15), Estimate(0.2, 0.1, 0.3))


def test_task_metric_is_normalised_target_probability() -> None:
    import torch

    from llmaudit.tasks import metric

    probs = torch.tensor([[0.1, 0.3, 0.0, 0.0], [0.2, 0.2, 0.1, 0.5]])
    assert metric(probs, [1, 3]).tolist() == pytest.approx([0.75, 0.5])
