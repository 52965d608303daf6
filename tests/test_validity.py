"""The validity chapter's pieces: SSA name bins, name-perturbed credit prompts, the filtered implicit gap, the
name projection (against a planted direction) and the correlation interval."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import scipy.stats
import torch

from llmaudit.chapters.decision_tasks import CREDIT
from llmaudit.chapters.steering_vectors import SteeringVector
from llmaudit.chapters.validity.names import (
    BINS,
    SSA_KEY,
    credit_items,
    female_bin,
    filtered_cases,
    filtered_gap,
    sample_per_bin,
    ssa_names,
    unnamed_items,
)
from llmaudit.chapters.validity.projection import (
    ALL_NAMES,
    MIXED_NAMES,
    SENTENCE,
    name_projections,
    name_prompt,
    projection_fits,
)
from llmaudit.data import read_csv
from llmaudit.errors import AuditError
from llmaudit.report.evidence import largest_differences, unit_values
from llmaudit.stats import pearson


def test_bins_round_down_to_tenths_and_keep_one_for_p_f_one() -> None:
    p_f = [0.0, 0.05, 0.1, 0.3, 0.7, 0.2999, 0.95, 0.999, 1.0]
    assert female_bin(p_f).tolist() == [0.0, 0.0, 0.1, 0.3, 0.7, 0.2, 0.9, 0.9, 1.0]


def test_ssa_names_keep_frequent_names_with_their_female_share(mirror) -> None:
    names = ssa_names(mirror, min_births=2500)
    raw = read_csv(SSA_KEY, mirror)
    assert (names["births"] >= 2500).all() and len(names) == int((raw["F"] + raw["M"] >= 2500).sum())
    assert np.allclose(names.set_index("name")["p_f"], raw.set_index("name").loc[names["name"], "F_pct"])
    assert sorted(names["bin"].unique()) == list(BINS)
    assert len(ssa_names(mirror, min_births=50000)) < len(names)
    with pytest.raises(AuditError, match="min_births"):
        ssa_names(mirror, min_births=10**9)


def test_sample_per_bin_is_seeded_and_capped(mirror) -> None:
    names = ssa_names(mirror)
    sample = sample_per_bin(names, 5, seed=1)
    assert sample["bin"].value_counts().max() == 5 and sample["bin"].nunique() == 11
    assert sample.equals(sample_per_bin(names, 5, seed=1)) and not sample.equals(sample_per_bin(names, 5, seed=2))


def test_credit_items_give_one_name_per_bin_and_no_gender(mirror) -> None:
    profiles = CREDIT.items("neutral", 3, seed=0, mirror=mirror)
    items = credit_items(profiles, ssa_names(mirror), seed=0)
    assert len(items) == 3 * 11 and [i.group for i in items[:11]] == [f"{b:.1f}" for b in BINS]
    for item in items:
        assert female_bin([item.meta["p_f"]])[0] == float(item.group)
        assert f"- Name: {item.meta['name']}\n" in item.prompt and "Gender:" not in item.prompt
        assert item.target == CREDIT.answers.index("Bad")
    assert [i.prompt for i in items] == [i.prompt for i in credit_items(profiles, ssa_names(mirror), seed=0)]
    assert [i.prompt for i in items] != [i.prompt for i in credit_items(profiles, ssa_names(mirror), seed=1)]
    for item in unnamed_items(profiles):
        assert "Gender:" not in item.prompt and "Name:" not in item.prompt and "Credit history:" in item.prompt


def test_filtered_gap_compares_female_and_male_names_per_profile() -> None:
    rows = []
    for case in range(20):
        for p_f in (0.0, 0.05, 0.45, 0.55, 0.95, 1.0):
            rows.append({"case": str(case), "p_f": p_f, "metric": 0.2 + 0.1 * p_f + 0.001 * case})
    frame = pd.DataFrame(rows)
    wide, used = filtered_gap(frame, 0.4, 0.6, n_boot=200, seed=0)
    assert used == 20 and wide.value == pytest.approx(0.1 * ((0.95 + 1.0) / 2 - (0.0 + 0.05) / 2))
    narrow, _ = filtered_gap(frame, 0.5, 0.5, n_boot=200, seed=0)
    assert narrow.value == pytest.approx(0.1 * ((0.55 + 0.95 + 1) / 3 - (0 + 0.05 + 0.45) / 3))
    none, used = filtered_gap(frame[frame["p_f"] < 0.5], 0.4, 0.6, n_boot=200, seed=0)
    assert none is None and used == 0


def test_filtered_cases_carry_the_per_profile_gaps_filtered_gap_averages() -> None:
    rows = [{"case": case, "p_f": p_f, "name": f"n{p_f}", "metric": 0.1 * case + p_f ** 2, "mass": 0.5,
             "prompt": f"profile {case} name n{p_f}"}
            for case in range(6) for p_f in (0.0, 0.08, 0.5, 0.93, 1.0)]
    rows = [r for r in rows if not (r["case"] == 5 and r["p_f"] > 0.5)]  # profile 5: male-majority names only
    frame = pd.DataFrame(rows)
    estimate, used = filtered_gap(frame, 0.1, 0.9, n_boot=50, seed=0)
    records = filtered_cases(frame, 0.1, 0.9, "credit.names_implicit")
    assert used == 5 and set(records["group"]) == {"female", "male"}  # p_f = 0.5 is on neither side
    assert records.loc[records["unit"] == "5", "value"].isna().all()
    values = unit_values(records)
    assert len(values) == 5 and values["value"].mean() == pytest.approx(estimate.value)
    assert values["value"].to_numpy() == pytest.approx([(0.93 ** 2 + 1) / 2 - 0.08 ** 2 / 2] * 5)
    assert (records["test"] == "credit.names_implicit").all() and {"name", "p_f"} <= set(records.columns)
    assert largest_differences(records, "credit.names_implicit", k=1)[["side_a", "side_b"]].iloc[0].tolist() == [
        "female", "male"]


def test_name_projection_on_a_planted_direction(bind, tiny_model) -> None:
    texts = [name_prompt(tiny_model, name) for name in ("nurse", "doctor", "teacher")]
    assert texts[0].endswith(SENTENCE.format(name="nurse")) and "Complete the sentence" in texts[0]
    acts = tiny_model.forward(texts, (), layers=[2]).acts[:, 0]
    planted = SteeringVector("v", "gender", 2, torch.nn.functional.normalize(acts[0] - acts[1], dim=0), acts[1], 1.0)
    proj = name_projections(bind(tiny_model, batch_tokens=64), planted, ["nurse", "doctor", "teacher"])
    assert proj[0] == pytest.approx(float((acts[0] - acts[1]).norm()), rel=1e-4) and abs(proj[1]) < 1e-4
    assert proj[2] == pytest.approx(float((acts[2] - acts[1]) @ planted.direction), abs=1e-4)


def test_pearson_matches_scipy_and_fisher_interval() -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(size=200)
    y = 0.6 * x + rng.normal(size=200)
    est = pearson(x, y)
    assert est.value == pytest.approx(scipy.stats.pearsonr(x, y)[0])
    z, half = np.arctanh(est.value), 1.959963984540054 / np.sqrt(197)
    assert (est.lo, est.hi) == pytest.approx((np.tanh(z - half), np.tanh(z + half)))
    with pytest.raises(AuditError, match="at least 4"):
        pearson(x[:3], y[:3])


def test_projection_headline_is_every_projected_name_and_mixed_names_apart(mirror) -> None:
    """The paper's design: r over every eligible name; a stratified sample over-weights the mixed bins, where a
    direction that only separates female from male names is flat, and gives a lower r."""
    rng = np.random.default_rng(0)
    names = ssa_names(mirror).copy()
    names["projection"] = np.sign(names["p_f"] - 0.5) + rng.normal(scale=0.5, size=len(names))  # separates, no grading
    shown = sample_per_bin(names, 60, 0)
    fits = projection_fits(names, shown)
    n, headline = fits[ALL_NAMES]
    assert n == len(names) == 6333 and headline.value == pytest.approx(pearson(
        names["projection"].to_numpy(), names["p_f"].to_numpy()).value)
    n_mixed, mixed = fits[MIXED_NAMES]
    assert n_mixed == int(((names["p_f"] >= 0.1) & (names["p_f"] < 0.9)).sum())
    assert fits["stratified sample (as drawn)"][1].value < headline.value


def test_projection_figure_draws_every_eligible_name(mirror) -> None:
    """The figure's bin-mean line over all 6333 names renders (altair refuses more than 5000 raw rows in a chart)."""
    from llmaudit.chapters.validity.plots import projections
    from llmaudit.report.charts import to_svg

    names = ssa_names(mirror).copy()
    names["projection"] = names["p_f"]
    svg = to_svg(projections(sample_per_bin(names, 60, 0), names))
    assert svg.lstrip().startswith("<svg") or "<svg" in svg[:200]
