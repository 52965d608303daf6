"""Figures that say what they measure (issue 44): Figure 2.1 drew gaps (probabilities) and slopes (per unit lambda)
on one axis, cut a white-box interval at the axis edge and drew not-measurable tests like measured ones; heatmaps
printed their axis titles over the row labels and wrote cells in 10 px text."""

from __future__ import annotations

import pandas as pd

from llmaudit.chapters.decision_tasks.plots import estimates
from llmaudit.chapters.greyed import GREY
from llmaudit.chapters.markedness.plots import gaps
from llmaudit.chapters.similarity.plots import matrix

LONGEST = ["HuggingFaceTB/SmolLM2-135M-Instruct λ=-1.0", "meta-llama/Llama-3.1-8B-Instruct λ=+1.0",
           "mistralai/Ministral-8B-Instruct-2410"]
CHAR = 0.62  # a Helvetica character's width per px of font size, generously
UNITS = {"black-box": "difference of the metric", "white-box": "per unit λ"}


def estimates_table() -> pd.DataFrame:
    """Gaps and slopes of two tasks; a slope reaching -0.2, one gap not measurable."""
    return pd.DataFrame({
        "task": ["credit", "credit", "admissions_race", "admissions_race"],
        "method": ["black-box explicit", "white-box slope", "black-box explicit", "white-box slope"],
        "value": [0.01, 0.05, -0.002, -0.118], "lo": [-0.01, 0.02, -0.01, -0.2], "hi": [0.03, 0.08, 0.005, -0.05],
        "verdict": ["pass", "fail", "not measurable", None]})


def test_gaps_and_slopes_get_their_own_panels_axes_and_units() -> None:
    spec = estimates(estimates_table(), "estimate", {"black-box": 0.02, "white-box": 0.03}).to_dict()
    panels = spec["vconcat"]
    assert len(panels) == 2
    for panel, kind, epsilon in zip(panels, ("black-box", "white-box"), (0.02, 0.03), strict=True):
        rows = pd.DataFrame(spec["datasets"][panel["layer"][2]["data"]["name"]])
        assert set(rows["method"].str.split(" ").str[0]) == {kind}
        whisker = panel["layer"][2]["encoding"]["x"]
        assert whisker["title"].startswith(kind) and UNITS[kind] in whisker["title"]
        low, high = whisker["scale"]["domain"]
        assert low < min(rows["lo"].min(), -epsilon) and high > max(rows["hi"].max(), epsilon)  # nothing cut


def test_not_measurable_tests_are_grey_with_a_legend_entry() -> None:
    spec = estimates(estimates_table(), "estimate", 0.02).to_dict()
    colour = spec["vconcat"][0]["layer"][2]["encoding"]["color"]
    scale = colour["scale"]
    assert scale["domain"][-1] == "not measurable" and scale["range"][-1] not in scale["range"][:-1]


def test_a_probe_set_whose_gap_tests_are_not_measurable_is_grey_in_the_markedness_gaps() -> None:
    summary = pd.DataFrame({"dataset": ["regard", "regard", "amazon", "amazon"], "kind": ["neg", "pos"] * 2,
                            "group": ["white"] * 4, "mean": [0.1, -0.1, 0.0, 0.02], "lo": [0.0, -0.2, -0.1, 0.0],
                            "hi": [0.2, 0.0, 0.1, 0.04],
                            "verdict": ["not measurable", "not measurable", "pass", "fail"]})
    spec = gaps(summary).to_dict()
    colour = spec["spec"]["layer"][1]["encoding"]["color"]
    assert colour["field"] == "shown" and colour["scale"]["domain"] == ["regard", "amazon", "not measurable"]
    assert colour["scale"]["range"][-1] == GREY and GREY not in colour["scale"]["range"][:-1]
    shown = pd.DataFrame(spec["datasets"][spec["data"]["name"]])["shown"]
    assert shown.tolist() == ["not measurable", "not measurable", "amazon", "amazon"]
    plain = gaps(summary.drop(columns="verdict")).to_dict()["spec"]["layer"][1]["encoding"]["color"]
    assert plain["scale"]["domain"] == ["regard", "amazon"]  # without verdicts, every set in its own colour


def test_heatmap_labels_fit_and_never_collide_on_the_longest_system_names() -> None:
    table = pd.DataFrame(0.98765, index=LONGEST, columns=LONGEST).rename_axis(index="base model", columns="tuned")
    spec = matrix(table, "cosine").to_dict()
    rect, text = spec["layer"]
    for channel in ("x", "y"):
        axis = rect["encoding"][channel]["axis"]
        assert axis["title"] is None  # no axis title to sit over the labels
        assert axis["labelLimit"] == 0  # no label cut to "…"
    assert rect["encoding"]["x"]["axis"]["labelAngle"] == -45
    assert rect["encoding"]["color"]["title"] == ["cosine", "rows: base model", "columns: tuned"]
    value = format(0.98765, text["encoding"]["text"]["format"])
    font, width, height = text["mark"]["fontSize"], spec["width"]["step"], spec["height"]["step"]
    assert value == "0.988" and font >= 12
    assert len(value) * CHAR * font + 8 <= width and font * 1.5 <= height  # the value inside its cell
