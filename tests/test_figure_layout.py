"""Figures that say what they measure (issue 44): Figure 2.1 drew gaps (probabilities) and slopes (per unit lambda)
on one axis, cut a white-box interval at the axis edge and drew not-measurable tests like measured ones; heatmaps
printed their axis titles over the row labels and wrote cells in 10 px text."""

from __future__ import annotations

import pandas as pd

from llmaudit.chapters.decision_tasks.plots import estimates, sweep_curves
from llmaudit.chapters.greyed import GREY, PALETTE
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
    assert colour["field"] == "shown" and colour["scale"]["domain"] == ["amazon", "not measurable"]
    assert colour["scale"]["range"] == [PALETTE[1], GREY]  # amazon keeps its own colour; regard has no grey-only entry
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


def _points(layers: list[dict]) -> dict:
    """The point layer's encoding among a chart's layers."""
    return next(layer["encoding"] for layer in layers if layer["mark"]["type"] == "point")


def test_a_grey_point_keeps_its_series_shape() -> None:
    """Grey says 'not measurable' but not which series: Figure 2.1's explicit and implicit gaps, greyed, were two
    identical dots, and Figure 7.1's 36 grey dots sat under a three-colour legend naming no grey series."""
    table = estimates_table().assign(verdict="not measurable")
    table.loc[1, "method"] = "black-box implicit"
    shape = _points(estimates(table, "estimate", 0.02).to_dict()["vconcat"][0]["layer"])["shape"]
    assert shape["field"] == "method"
    assert len(set(shape["scale"]["range"])) == len(shape["scale"]["domain"]) == 3
    summary = pd.DataFrame({"dataset": ["regard", "amazon", "semeval"], "kind": ["neg"] * 3, "group": ["white"] * 3,
                            "mean": [0.1, 0.0, 0.2], "lo": [0.0, -0.1, 0.1], "hi": [0.2, 0.1, 0.3],
                            "verdict": ["not measurable"] * 3})
    encoding = _points(gaps(summary).to_dict()["spec"]["layer"])
    assert encoding["color"]["scale"]["domain"] == ["not measurable"]  # no colour names a series drawn grey
    assert encoding["shape"]["field"] == "dataset" and len(set(encoding["shape"]["scale"]["range"])) == 3


def test_white_box_ticks_are_few_enough_not_to_touch() -> None:
    spec = estimates(estimates_table(), "estimate", 0.02).to_dict()
    for panel in spec["vconcat"]:
        axis = next(layer["encoding"]["x"]["axis"] for layer in panel["layer"] if "axis" in layer["encoding"]["x"])
        assert axis["tickCount"] <= 5 and axis["labelOverlap"]


def test_each_kind_of_sweep_curve_has_one_legend_at_full_opacity() -> None:
    """Figure 2.2's one legend mixed speaker groups, vectors and stated groups in 8 entries at the bands' 20%
    opacity."""
    lam = [-1.0, 0.0, 1.0]
    curves = pd.DataFrame({"panel": ["credit"] * 3 + ["judicial"] * 6, "lam": lam * 3, "mean": 0.3, "lo": 0.2,
                           "hi": 0.4, "curve": ["gender_lang"] * 3 + ["AAL speakers"] * 3 + ["WME speakers"] * 3,
                           "kind": ["steering vector"] * 3 + ["speakers"] * 6})
    levels = pd.DataFrame({"panel": ["credit", "credit", "judicial"], "mean": [0.3, 0.2, 0.25],
                           "curve": ["female", "male", "AAL speakers"],
                           "kind": ["stated group", "stated group", "speakers"]})
    spec = sweep_curves(curves, levels).to_dict()
    legends = [(kind_layer["layer"][0]["encoding"]["color"], kind_layer["layer"][0]["encoding"]["color"]["legend"])
               for panel in spec["concat"] for kind_layer in panel["layer"]]
    shown = {colour["title"]: colour["scale"]["domain"] for colour, legend in legends if legend is not None}
    assert shown == {"steering vector": ["gender_lang"], "stated group": ["female", "male"],
                     "speakers": ["AAL speakers", "WME speakers"]}
    assert all(legend["symbolOpacity"] == 1 for _, legend in legends if legend is not None)
    assert len([legend for _, legend in legends if legend is not None]) == 3  # one per kind, not one per panel
    ranges = [c for colour, _ in legends for c in colour["scale"]["range"]]
    assert len(set(ranges)) == 5  # no two curves of different kinds share a colour
