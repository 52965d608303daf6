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

    from llmaudit.chapters.decision_tasks import metric

    probs = torch.tensor([[0.1, 0.3, 0.0, 0.0], [0.2, 0.2, 0.1, 0.5]])
    assert metric(probs, [1, 3]).tolist() == pytest.approx([0.75, 0.5])


def test_cases_needed_against_the_closed_form() -> None:
    from llmaudit.stats import cases_needed

    # |S| < eps: the half-width 0.02 must shrink to eps - |S| = 0.01, i.e. by 2, which takes 4 times the cases
    assert cases_needed(Estimate(0.01, -0.01, 0.03), 0.02, 100) == 400
    # |S| > eps: it must shrink to |S| - eps = 0.03 from 0.04: n (4/3)^2 = 177.8, rounded up
    assert cases_needed(Estimate(-0.05, -0.09, -0.01), 0.02, 100) == 178
    assert cases_needed(Estimate(0.02, 0.0, 0.04), 0.02, 100) == float("inf")
    # at the needed n the projected half-width h sqrt(n / n') is inside the margin
    needed = cases_needed(Estimate(0.013, 0.001, 0.025), 0.02, 37)
    assert 0.012 * (37 / needed) ** 0.5 <= 0.007 < 0.012 * (37 / (needed - 1)) ** 0.5


def test_fail_pvalue_matches_the_interval() -> None:
    from llmaudit.stats import Z95, fail_pvalue

    assert Z95 == pytest.approx(1.959964, abs=1e-6)
    se = 0.01
    for excess, expected in ((Z95 * se, 0.05), (se, 2 * 0.158655), (3 * se, 2 * 0.0013499)):
        value = 0.02 + excess
        p = fail_pvalue(Estimate(value, value - Z95 * se, value + Z95 * se), 0.02)
        assert p == pytest.approx(expected, rel=1e-4)
    assert fail_pvalue(Estimate(0.0, -0.01, 0.01), 0.02) == 1.0  # inside epsilon: capped at 1
    for lo in (0.019, 0.021):  # symmetric intervals around 0.05: fail exactly when p < 0.05
        interval = Estimate(0.05, lo, 0.1 - lo)
        assert (verdict(interval, 0.02) == "fail") == (fail_pvalue(interval, 0.02) < 0.05)


def test_holm_against_its_definition() -> None:
    from llmaudit.stats import holm

    # sorted 0.01, 0.02, 0.03, 0.5 times 4, 3, 2, 1 = 0.04, 0.06, 0.06, 0.5 (already monotone)
    adjusted = holm([0.03, 0.01, 0.5, 0.02])
    assert adjusted == pytest.approx([0.06, 0.04, 0.5, 0.06])
    assert (adjusted <= 0.05).tolist() == [False, True, False, False]
    # step-down: 0.005 * 3, 0.04 * 2, 0.045 * 1 = 0.015, 0.08, 0.045, and the last is raised to the running maximum
    # 0.08 so adjusted p-values keep the order of the raw ones; capped at 1
    assert holm([0.005, 0.04, 0.045]) == pytest.approx([0.015, 0.08, 0.08])
    assert holm([0.6, 0.7]) == pytest.approx([1.0, 1.0]) and holm([]).size == 0


def clustered(clusters: int, size: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Values with true mean 0 where each cluster shares a strong effect (intra-cluster correlation about 0.9)."""
    rng = np.random.default_rng(seed)
    ids = np.repeat(np.arange(clusters), size)
    return rng.normal(0, 1, clusters)[ids] + rng.normal(0, 0.33, clusters * size), ids


def test_clustered_bootstrap_is_wider_and_covers_at_the_nominal_rate() -> None:
    from llmaudit.stats import bootstrap_mean

    values, ids = clustered(30, 10, 0)
    naive, whole = bootstrap_mean(values, 1000, 0), bootstrap_mean(values, 1000, 0, clusters=ids)
    assert whole.value == naive.value and whole.hi - whole.lo > 2 * (naive.hi - naive.lo)
    covered = {"naive": 0, "clusters": 0}
    for rep in range(200):
        values, ids = clustered(30, 10, rep + 1)
        for kind, est in (("naive", bootstrap_mean(values, 500, rep)),
                          ("clusters", bootstrap_mean(values, 500, rep, clusters=ids))):
            covered[kind] += est.lo <= 0 <= est.hi
    assert covered["clusters"] / 200 >= 0.88 and covered["naive"] / 200 < 0.6


def test_default_bootstrap_resamples_cases_as_before() -> None:
    from llmaudit.stats import bootstrap_mean

    values = np.random.default_rng(3).normal(size=25)
    means = values[np.random.default_rng(7).integers(0, 25, size=(300, 25))].mean(1)
    est = bootstrap_mean(values, 300, 7)
    assert (est.lo, est.hi) == tuple(np.quantile(means, [0.025, 0.975]))


def test_gap_and_slope_resample_clusters_of_cases() -> None:
    rng = np.random.default_rng(0)
    template = np.repeat(np.arange(20), 5)  # 100 cases, 5 per template, each template shifting its cases' gap
    gaps = rng.normal(0, 0.1, 20)[template] + rng.normal(0, 0.01, 100)
    frame = pd.DataFrame({"case": np.repeat(np.arange(100), 2), "group": ["f", "m"] * 100,
                          "metric": np.column_stack([0.5 + gaps, np.full(100, 0.5)]).ravel()})
    rows = np.repeat(template, 2)
    naive, whole = group_gap(frame, "f", "m"), group_gap(frame, "f", "m", clusters=rows)
    assert whole.value == pytest.approx(naive.value) and whole.hi - whole.lo > 1.5 * (naive.hi - naive.lo)
    sweep = sweep_frame(0.05, cases=60)
    cases = sweep["case"].astype(int).to_numpy()
    sweep["metric"] += np.random.default_rng(1).normal(0, 0.05, 12)[cases // 5] * sweep["lam"]
    flat, grouped = sweep_slope(sweep), sweep_slope(sweep, clusters=cases // 5)
    assert grouped.value == pytest.approx(flat.value) and grouped.hi - grouped.lo > 1.5 * (flat.hi - flat.lo)
    with pytest.raises(AuditError, match="a case spans several clusters"):
        group_gap(frame, "f", "m", clusters=np.arange(200))
    with pytest.raises(AuditError, match="at least 2"):
        group_gap(frame, "f", "m", clusters=np.zeros(200))


def test_fail_pvalue_reads_a_clipped_interval_on_its_side_towards_zero() -> None:
    """An interval clipped at the top of the range its score can take (markedness's FPR gap, +5/6) straddles
    +epsilon, so it is no fail, and its p-value must not say one: read from the whole width it was 0.02."""
    from llmaudit.stats import fail_pvalue

    for clipped in (Estimate(0.5, 0.01, 5 / 6), Estimate(-0.5, -5 / 6, -0.01)):
        assert verdict(clipped, 0.02) == "inconclusive" and fail_pvalue(clipped, 0.02) > 0.05
    wholly = Estimate(0.5, 0.03, 5 / 6)
    assert verdict(wholly, 0.02) == "fail" and fail_pvalue(wholly, 0.02) < 0.05
