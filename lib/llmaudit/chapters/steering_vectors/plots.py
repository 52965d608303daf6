"""Figures of the steering-vectors chapter."""

from __future__ import annotations

import altair as alt
import pandas as pd

from llmaudit.chapters.summaries import boxes, five_numbers, sample_per, shown_note

PANEL = {"width": 250, "height": 180}


def layer_curves(layers: pd.DataFrame, chosen: dict[str, int]) -> alt.FacetChart:
    """Per-layer validation metrics (corr, sep, corr - sep) of each vector, the chosen layer marked by a rule.
    `layers` has columns vector, layer, corr, sep, objective."""
    names = {"corr": "correlation", "sep": "sign penalty", "objective": "corr − sep"}
    long = layers.melt(id_vars=["vector", "layer"], value_vars=list(names), var_name="metric")
    long = long.assign(metric=long["metric"].map(names), chosen=long["vector"].map(chosen))
    base = alt.Chart().properties(**PANEL)
    lines = base.mark_line(point=alt.OverlayMarkDef(size=18)).encode(
        x=alt.X("layer:Q", title="block"),
        y=alt.Y("value:Q", title="validation metric"),
        color=alt.Color("metric:N", sort=list(names.values()), title=None),
    )
    rule = base.mark_rule(strokeDash=[4, 3], color="black").encode(x="min(chosen):Q")
    return alt.layer(lines, rule, data=long).facet(facet=alt.Facet("vector:N", title=None), columns=2)


def projection_scatter(val: pd.DataFrame, title: str, seed: int = 0) -> alt.FacetChart:
    """Projection on the chosen vector against concept score, validation texts, coloured by data label, at most
    `summaries.POINTS` texts per vector (a seeded sample, said under the title). `val` has columns vector, score,
    projection, group."""
    return (
        alt.Chart(sample_per(val[["vector", "score", "projection", "group"]], "vector", seed=seed))
        .mark_circle(size=22, opacity=0.6)
        .encode(
            x=alt.X("score:Q", title="concept score s"),
            y=alt.Y("projection:Q", title="projection (a − μ₀)·v"),
            color=alt.Color("group:N", title="data label"),
        )
        .properties(**PANEL)
        .facet(facet=alt.Facet("vector:N", title=None), columns=2)
        .resolve_scale(x="independent", y="independent", color="independent")
        .properties(title=alt.Title(title, subtitle=shown_note(val, "vector")))
    )


def projection_by_label(val: pd.DataFrame) -> alt.FacetChart:
    """Distribution of projections per data label (box plots over every text), one panel per vector."""
    stats = five_numbers(val.assign(group=val["group"].astype(str)), ["vector", "group"], "projection")
    return (
        boxes(stats, "group", "projection (a − μ₀)·v", color="group")
        .properties(width=250, height=180)
        .facet(facet=alt.Facet("vector:N", title=None), columns=2)
        .resolve_scale(x="independent", y="independent")
    )
