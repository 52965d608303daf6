"""Figures draw a test that the verdict page finds not measurable (its instrument failed a gate) in grey, with a
legend entry, so that it is never read like a measured one; each series keeps its own point shape, so a grey point
still says which series it belongs to."""

from __future__ import annotations

import altair as alt
import pandas as pd

NOT_MEASURABLE = "not measurable"
GREY = "#b4b9bf"
PALETTE = ["#4c78a8", "#f58518", "#e45756", "#72b7b2", "#54a24b", "#eeca3b", "#b279a2", "#ff9da6", "#9d755d"]
SHAPES = ["circle", "square", "triangle-up", "diamond", "cross", "triangle-down", "triangle-left", "triangle-right"]


def greyed(labels: pd.Series, verdicts: pd.Series | None) -> tuple[pd.Series, alt.Scale]:
    """Each row's colour label (its own, or 'not measurable' where its verdict is) and the colour scale that gives
    every label its palette colour in order of appearance and 'not measurable' grey (`verdicts`: None for none). A
    label with no measurable row has no colour entry in the legend (its points are all grey), but the others keep
    the colour they have when it is measured, so one series has one colour across figures of one audit."""
    unmeasured = (verdicts == NOT_MEASURABLE) if verdicts is not None else pd.Series(False, index=labels.index)
    shown = labels.astype(str).where(~unmeasured, NOT_MEASURABLE)
    own = list(dict.fromkeys(labels.astype(str)))
    kept = [label for label in own if label in set(shown)]
    grey = [NOT_MEASURABLE] if unmeasured.any() else []
    colours = [PALETTE[own.index(label) % len(PALETTE)] for label in kept] + [GREY] * len(grey)
    return shown, alt.Scale(domain=kept + grey, range=colours)


def shapes(labels: pd.Series, field: str, title: str) -> alt.Shape:
    """The shape encoding that gives each series (`labels`, the values of `field`) its own point shape in order of
    appearance, with its legend titled `title`: the series' identity where its colour turned grey."""
    own = list(dict.fromkeys(labels.astype(str)))
    return alt.Shape(f"{field}:N", title=title,
                     scale=alt.Scale(domain=own, range=[SHAPES[i % len(SHAPES)] for i in range(len(own))]))
