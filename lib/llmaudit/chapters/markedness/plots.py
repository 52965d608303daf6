"""Figures of the markedness chapter: FPR gaps per group with intervals (paper 004 Figures 1-4), agreement with
the unmarked sentence, and projections on the race vector."""

from __future__ import annotations

import altair as alt
import pandas as pd

from llmaudit.chapters.greyed import greyed, shapes
from llmaudit.chapters.summaries import boxes, five_numbers


def gaps(summary: pd.DataFrame) -> alt.FacetChart:
    """Mean FPR gap per group with its 95% interval, one panel per kind, one colour per dataset (columns dataset,
    kind, group, mean, lo, hi, and optionally verdict: the verdict page's on that dataset's and kind's gap test, a
    not-measurable one drawn grey, keeping its dataset's shape)."""
    shown, colours = greyed(summary["dataset"], summary["verdict"] if "verdict" in summary else None)
    summary = summary.assign(shown=shown)
    base = alt.Chart().encode(
        y=alt.Y("group:N", title=None), yOffset=alt.YOffset("dataset:N"),
        color=alt.Color("shown:N", title=None, scale=colours)
    )
    return alt.layer(
        alt.Chart().mark_rule(color="gray").encode(x=alt.datum(0)),
        base.mark_rule().encode(x=alt.X("lo:Q", title="FPR gap d(X) = FPR(X) − mean over groups"), x2="hi:Q"),
        base.mark_point(filled=True, size=55, opacity=1).encode(
            x="mean:Q", shape=shapes(summary["dataset"], "dataset", "probe set (by shape)"),
            tooltip=["dataset", "group", "mean", "lo", "hi"]),
        data=summary,
    ).properties(width=300, height=alt.Step(12)).facet(column=alt.Column("kind:N", title=None))


def agreement(table: pd.DataFrame) -> alt.Chart:
    """Share of templates predicted as the unmarked sentence is, per group and dataset (columns dataset, group,
    agrees)."""
    return alt.Chart(table).mark_bar().encode(
        x=alt.X("agrees:Q", title="same label as the sentence without a group word", scale=alt.Scale(domain=[0, 1])),
        y=alt.Y("group:N", title=None), yOffset="dataset:N", color=alt.Color("dataset:N", title=None),
    ).properties(width=420, height=alt.Step(10))


def projections(frame: pd.DataFrame, vector: str) -> alt.LayerChart:
    """Distribution of the prompts' projections on the race vector per group (columns group, projection): one box
    per group over every prompt."""
    stats = five_numbers(frame, ["group"], "projection")
    return boxes(stats, "group", f"projection on {vector} (− White, + Black)", horizontal=True).properties(
        width=420, height=alt.Step(18))
