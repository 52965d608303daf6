"""Figures draw a test that the verdict page finds not measurable (its instrument failed a gate) in grey, with a
legend entry, so that it is never read like a measured one."""

from __future__ import annotations

import altair as alt
import pandas as pd

NOT_MEASURABLE = "not measurable"
GREY = "#b4b9bf"
PALETTE = ["#4c78a8", "#f58518", "#e45756", "#72b7b2", "#54a24b", "#eeca3b", "#b279a2", "#ff9da6", "#9d755d"]


def greyed(labels: pd.Series, verdicts: pd.Series | None) -> tuple[pd.Series, alt.Scale]:
    """Each row's colour label (its own, or 'not measurable' where its verdict is) and the colour scale that gives
    every label its palette colour in order of appearance and 'not measurable' grey (`verdicts`: None for none)."""
    unmeasured = (verdicts == NOT_MEASURABLE) if verdicts is not None else pd.Series(False, index=labels.index)
    shown = labels.astype(str).where(~unmeasured, NOT_MEASURABLE)
    own = list(dict.fromkeys(labels.astype(str)))
    domain = own + ([NOT_MEASURABLE] if unmeasured.any() else [])
    colours = [PALETTE[i % len(PALETTE)] for i in range(len(own))] + [GREY] * (len(domain) - len(own))
    return shown, alt.Scale(domain=domain, range=colours)
