"""Charts of thousands of rows draw (altair embeds at most 5,000): box plots from five numbers computed exactly,
scatters sampled per panel; the paper-size profile once stopped on both."""

from __future__ import annotations

import numpy as np
import pandas as pd

from llmaudit.chapters.markedness import plots as markedness
from llmaudit.chapters.steering_vectors import plots as steering
from llmaudit.chapters.summaries import POINTS, five_numbers, sample_per
from llmaudit.report import show

RNG = np.random.default_rng(0)


def validation(sizes: dict[str, int]) -> pd.DataFrame:
    n = sum(sizes.values())
    return pd.DataFrame({"vector": np.repeat(list(sizes), list(sizes.values())), "score": RNG.normal(size=n),
                         "projection": RNG.normal(size=n), "group": RNG.choice(["female", "male"], n)})


def test_paper_size_steering_figures_draw() -> None:
    val = validation({"gender_lang": 2796, "race_dial": 3018, "race_id": 368, "gender_id": 368})  # 6550 rows
    assert "<svg" in show(steering.projection_scatter(val, "title")).svg
    assert "<svg" in show(steering.projection_by_label(val)).svg


def test_paper_size_markedness_figure_draws() -> None:
    prompts = pd.DataFrame({"group": RNG.choice(list("abcdefg"), 6923), "projection": RNG.normal(size=6923)})
    assert "<svg" in show(markedness.projections(prompts, "race_dial")).svg


def test_five_numbers_are_the_data_s() -> None:
    frame = pd.DataFrame({"g": ["a"] * 5 + ["b"] * 3, "x": [5.0, 1, 4, 2, 3, 10, 30, 20]})
    stats = five_numbers(frame, ["g"], "x").set_index("g")
    assert stats.loc["a"].tolist() == [1, 2, 3, 4, 5, 5]
    assert stats.loc["b"].tolist() == [10, 15, 20, 25, 30, 3]


def test_scatter_sample_keeps_small_panels_whole_and_caps_large_ones() -> None:
    val = validation({"big": 3 * POINTS, "small": 10})
    kept = sample_per(val, "vector", seed=0)
    assert kept.groupby("vector").size().to_dict() == {"big": POINTS, "small": 10}
    assert kept.equals(sample_per(val, "vector", seed=0))  # seeded
