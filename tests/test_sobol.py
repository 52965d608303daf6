"""First-order Sobol' indices on synthetic data whose indices are known analytically."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from llmaudit.chapters.validity.sobol import associations, cramers_v, discretise, first_order, first_order_ci
from llmaudit.chapters.validity.spec import ValidityParams
from llmaudit.errors import AuditError

G_A = np.array([0.0, 1.0, 4.5, 9.0, 99.0])
G_V = 1 / (3 * (1 + G_A) ** 2)  # Var((|4x - 2| + a) / (1 + a)) for x ~ U(0, 1)
ISHIGAMI_V = 7**2 / 8 + 0.1 * np.pi**4 / 5 + 0.1**2 * np.pi**8 / 18 + 1 / 2  # a = 7, b = 0.1

# name: (inputs' sampler, function, analytic first-order indices), each checked against a 2-million-point
# pick-freeze (Saltelli 2010) estimate to within 0.002.
FUNCTIONS = {
    "ishigami": (lambda rng, n: rng.uniform(-np.pi, np.pi, (n, 3)),
                 lambda x: np.sin(x[:, 0]) + 7 * np.sin(x[:, 1]) ** 2 + 0.1 * x[:, 2] ** 4 * np.sin(x[:, 0]),
                 [(1 + 0.1 * np.pi**4 / 5) ** 2 / 2 / ISHIGAMI_V, 7**2 / 8 / ISHIGAMI_V, 0.0]),
    "sobol_g": (lambda rng, n: rng.uniform(0, 1, (n, len(G_A))),
                lambda x: np.prod((np.abs(4 * x - 2) + G_A) / (1 + G_A), axis=1),
                G_V / (np.prod(1 + G_V) - 1)),
    # x1^2 on U(-1, 1) has variance 1/5 - 1/9 = 4/45, x2 has 1/3; x3 is inert.
    "quadratic": (lambda rng, n: rng.uniform(-1, 1, (n, 3)), lambda x: x[:, 0] ** 2 + x[:, 1],
                  [(4 / 45) / (4 / 45 + 1 / 3), (1 / 3) / (4 / 45 + 1 / 3), 0.0]),
    # cos(4 pi x1) on U(0, 1) has variance 1/2 and averages to 0 over each quarter of [0, 1].
    "periodic": (lambda rng, n: rng.uniform(0, 1, (n, 2)), lambda x: np.cos(4 * np.pi * x[:, 0]) + x[:, 1],
                 [(1 / 2) / (1 / 2 + 1 / 12), (1 / 12) / (1 / 2 + 1 / 12)]),
}


def additive(a: float, b: float, noise: float, n: int, seed: int = 0) -> pd.DataFrame:
    """y = a*x1 + b*x2 + N(0, noise) with x1 (string labels) and x2 independent uniform on 0..4 (variance 2)."""
    rng = np.random.default_rng(seed)
    x1, x2 = rng.integers(0, 5, n), rng.integers(0, 5, n)
    y = a * x1 + b * x2 + rng.normal(0, noise, n)
    return pd.DataFrame({"x1": [f"level {v}" for v in x1], "x2": x2, "y": y})


def test_additive_model_recovers_analytic_shares_that_sum_to_one() -> None:
    s = first_order(additive(2.0, 1.0, noise=0.0, n=20_000), ["x1", "x2"], "y")
    assert s.index.tolist() == ["x1", "x2"]
    assert s["x1"] == pytest.approx(4 / 5, abs=0.01) and s["x2"] == pytest.approx(1 / 5, abs=0.01)
    assert s.sum() == pytest.approx(1.0, abs=0.01)


def test_binned_uniform_input_matches_analytic_between_bin_variance() -> None:
    rng = np.random.default_rng(1)
    x = rng.uniform(0, 1, 50_000)
    frame = pd.DataFrame({"x": x, "y": 3 * x + rng.normal(0, 3 / np.sqrt(12), len(x))})
    for bins in (3, 5):
        # Var(E[y | bin]) = 9 Var(x) (1 - 1/B^2) and Var(y) = 9 Var(x) + 9 Var(x).
        expected = (1 - 1 / bins**2) / 2
        assert first_order(frame, ["x"], "y", bins=bins)["x"] == pytest.approx(expected, abs=0.01)


def test_pure_noise_input_scores_about_zero_unlike_raw_eta_squared() -> None:
    n, levels, means = 200, 5, []
    for seed in range(200):
        rng = np.random.default_rng(seed)
        frame = pd.DataFrame({"x": rng.integers(0, levels, n), "y": rng.normal(size=n)})
        means.append(first_order(frame, ["x"], "y")["x"])
    # Raw eta^2 would average (levels - 1) / (n - 1) = 0.02; clipping at 0 leaves a small positive mean.
    assert np.mean(means) < 0.3 * (levels - 1) / (n - 1)
    assert np.median(means) < 0.002


def test_interaction_only_function_has_zero_first_order_indices() -> None:
    rng = np.random.default_rng(2)
    x1, x2 = rng.choice([-1, 1], 20_000), rng.choice([-1, 1], 20_000)
    s = first_order(pd.DataFrame({"x1": x1, "x2": x2, "y": x1 * x2}), ["x1", "x2"], "y")
    assert s.max() < 0.002


def test_constant_output_gives_zero_for_every_input() -> None:
    frame = pd.DataFrame({"x": ["a", "b", "a", "b"], "z": [1.0, 2.0, 2.0, 9.0], "y": 0.3})
    assert first_order(frame, ["x", "z"], "y").tolist() == [0.0, 0.0]


@pytest.mark.parametrize("bins", ["function default", "chapter default"])
@pytest.mark.parametrize("name", list(FUNCTIONS))
def test_non_monotone_test_functions_are_recovered_at_default_settings(name: str, bins: str) -> None:
    draw, f, truth = FUNCTIONS[name]
    x = draw(np.random.default_rng(8), 20_000)
    frame = pd.DataFrame(x, columns=[f"x{i + 1}" for i in range(x.shape[1])]).assign(y=f(x))
    chosen = {} if bins == "function default" else {"bins": ValidityParams().sobol_bins}
    found = first_order(frame, list(frame.columns[:-1]), "y", **chosen)
    assert found.to_numpy() == pytest.approx(truth, abs=0.02)
    assert (found[np.asarray(truth) == 0] < 0.005).all()  # inert inputs (Ishigami's x3 acts only with x1)


def test_numeric_classes_grow_with_the_number_of_cases_while_few_valued_numbers_keep_their_values() -> None:
    rng = np.random.default_rng(5)
    for n, classes in {64: 6, 1000: 16, 20_000: 53}.items():
        levels = discretise(pd.Series(rng.uniform(0, 1, n)))
        assert levels.nunique() == classes and levels.value_counts().max() - levels.value_counts().min() <= 1
    letters = pd.Series(rng.integers(0, 4, 64))
    assert discretise(letters).astype(int).tolist() == letters.tolist()


def test_intervals_cover_known_indices_at_the_audits_size() -> None:
    """Credit-like cases (categories with 3 and 10 levels, a continuous and a 4-valued number, an inert number)."""
    n, reps = 64, 200
    checking, purpose = np.array([0.0, 1.0, 2.0]), np.array([0.0, 0.0, 1.5, -0.5, 0.0, 0.5, 1.0, 0.2, 0.0, 0.0])
    rate, slope, noise = np.array([0.0, 0.5, 1.0, 1.5]), 3.0, 0.5
    variances = np.array([checking.var(), purpose.var(), slope**2 / 12, rate.var(), 0.0])
    names = ["checking", "purpose", "duration", "rate", "age"]
    truth = pd.Series(variances / (variances.sum() + noise**2), index=names)
    rng, hits = np.random.default_rng(9), pd.Series(0, index=truth.index)
    for rep in range(reps):
        c, p, d, r = rng.integers(0, 3, n), rng.integers(0, 10, n), rng.uniform(0, 1, n), rng.integers(0, 4, n)
        frame = pd.DataFrame({"checking": [f"A1{v}" for v in c], "purpose": [f"A4{v}" for v in p], "duration": d,
                              "rate": r + 1, "age": rng.uniform(19, 75, n)})
        frame["y"] = checking[c] + purpose[p] + slope * d + rate[r] + rng.normal(0, noise, n)
        ci = first_order_ci(frame, list(truth.index), "y", n_boot=200, seed=rep)
        hits += (ci["lo"] <= truth) & (truth <= ci["hi"])
    assert (hits / reps >= 0.9).all(), (hits / reps).to_dict()


def test_interval_covers_analytic_value_and_is_reproducible() -> None:
    frame = additive(2.0, 1.0, noise=1.0, n=500, seed=3)  # Var(y) = 4*2 + 1*2 + 1
    ci = first_order_ci(frame, ["x1", "x2"], "y", n_boot=500, seed=7)
    pd.testing.assert_series_equal(ci["value"], first_order(frame, ["x1", "x2"], "y"), check_names=False)
    assert ((ci["lo"] <= ci["value"]) & (ci["value"] <= ci["hi"])).all()
    for name, truth in {"x1": 8 / 11, "x2": 2 / 11}.items():
        assert ci.loc[name, "lo"] < truth < ci.loc[name, "hi"]
        assert ci.loc[name, "hi"] - ci.loc[name, "lo"] < 0.15
    pd.testing.assert_frame_equal(ci, first_order_ci(frame, ["x1", "x2"], "y", n_boot=500, seed=7))
    assert not ci.equals(first_order_ci(frame, ["x1", "x2"], "y", n_boot=500, seed=8))


def test_discretise_keeps_categories_and_few_valued_numbers_and_cuts_the_rest_into_equal_bins() -> None:
    labels = pd.Series(["savings: < 100 DM", "savings: >= 1000 DM", "unknown"] * 4)
    assert discretise(labels, bins=2).astype(str).tolist() == labels.tolist()
    few = pd.Series([1, 2, 3, 2, 1])
    assert discretise(few, bins=3).astype(int).tolist() == few.tolist()
    gpa = pd.Series(np.random.default_rng(4).uniform(2.1, 4.0, 1000))
    assert discretise(gpa, bins=4).value_counts().tolist() == [250] * 4


@pytest.mark.parametrize(
    ("inputs", "output", "rows", "named"),
    [
        (["x", "age"], "y", 5, "age"),
        (["x"], "p_bad", 5, "p_bad"),
        (["x"], "y", 2, "at least 3"),
    ],
)
def test_bad_requests_raise_an_audit_error_naming_the_problem(inputs, output, rows, named) -> None:
    frame = pd.DataFrame({"x": ["a", "b"] * 3, "id": list("abcdef"), "y": np.arange(6.0)}).head(rows)
    with pytest.raises(AuditError, match=named):
        first_order(frame, inputs, output)


def test_an_input_with_a_level_per_case_has_no_index() -> None:
    frame = pd.DataFrame({"x": ["a", "b"] * 3, "id": list("abcdef"), "y": [0.0, 1.0, 0.1, 0.9, 0.0, 1.0]})
    table = first_order_ci(frame, ["x", "id"], "y", n_boot=50)
    assert np.isnan(table.loc["id"]).all() and table.loc["x", "value"] > 0.9


def test_average_over_groups_is_the_mean_of_per_group_indices() -> None:
    rng = np.random.default_rng(7)
    base = pd.DataFrame({"x1": rng.integers(0, 4, 400), "x2": rng.integers(0, 4, 400)})
    frames = [base.assign(lam=lam, y=(1 + lam) * base["x1"] + base["x2"] + rng.normal(0, 0.1, 400))
              for lam in (0.0, 1.0)]
    averaged = first_order(pd.concat(frames), ["x1", "x2"], "y", average_over="lam")
    separate = (first_order(frames[0], ["x1", "x2"], "y") + first_order(frames[1], ["x1", "x2"], "y")) / 2
    assert np.allclose(averaged, separate) and averaged["x1"] > averaged["x2"]
    table = first_order_ci(pd.concat(frames), ["x1", "x2"], "y", average_over="lam", n_boot=100)
    assert (table["lo"] <= table["value"]).all() and (table["value"] <= table["hi"]).all()
    with pytest.raises(AuditError, match="same cases"):
        first_order(pd.concat([frames[0], frames[1].head(10)]), ["x1"], "y", average_over="lam")


def test_cramers_v_is_one_for_a_function_and_small_for_independent_variables() -> None:
    rng = np.random.default_rng(3)
    a = pd.Series(rng.integers(0, 4, 2000))
    assert cramers_v(a, a.map({0: "x", 1: "y", 2: "z", 3: "w"})) == pytest.approx(1.0)
    assert cramers_v(a, pd.Series(rng.integers(0, 3, 2000))) < 0.06
    pairs = associations(pd.DataFrame({"a": a, "b": a % 2, "c": rng.integers(0, 3, 2000)}), ["a", "b", "c"], bins=4)
    assert pairs.iloc[0][["variable", "with"]].tolist() == ["a", "b"] and pairs.iloc[0]["cramers_v"] == pytest.approx(1)
