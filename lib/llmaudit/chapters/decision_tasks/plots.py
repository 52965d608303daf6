"""Figures of the decision-tasks and robustness chapters."""

from __future__ import annotations

import altair as alt
import pandas as pd


def estimates(table: pd.DataFrame, title: str, epsilon: float | None = None) -> alt.LayerChart:
    """Point estimates with interval whiskers per task and method (columns task, method, value, lo, hi), with a
    zero line and, if given, the invariance band |S| <= epsilon shaded."""
    base = alt.Chart(table).encode(
        y=alt.Y("task:N", title=None, sort=list(dict.fromkeys(table["task"]))),
        yOffset=alt.YOffset("method:N"),
        color=alt.Color("method:N", title=None),
    )
    layers = []
    if epsilon is not None:
        band = pd.DataFrame({"lo": [-epsilon], "hi": [epsilon]})
        layers.append(alt.Chart(band).mark_rect(color="#e8f3e8").encode(x="lo:Q", x2="hi:Q"))
    layers += [
        alt.Chart(pd.DataFrame({"x": [0.0]})).mark_rule(color="gray").encode(x="x:Q"),
        base.mark_rule(strokeWidth=2).encode(x=alt.X("lo:Q", title=title), x2="hi:Q"),
        base.mark_point(filled=True, size=50).encode(x="value:Q", tooltip=["task", "method", "value", "lo", "hi"]),
    ]
    return alt.LayerChart(layer=layers).properties(width=480, height=alt.Step(14))


def sweep_curves(curves: pd.DataFrame, levels: pd.DataFrame | None = None) -> alt.FacetChart:
    """Mean task metric against lambda with a 95% band, one panel per task and one line per `curve` (a vector, or a
    speaker group as in the main paper's Fig. 2) (columns panel, curve, lam, mean, lo, hi); `levels` (columns panel,
    curve, mean) draws the black-box group means as dotted lines in their group's colour."""
    base = alt.Chart().transform_filter("isValid(datum.lo)").encode(
        x=alt.X("lam:Q", title="λ (− male / White, + female / Black)"), color=alt.Color("curve:N", title=None)
    )
    layers = [
        base.mark_area(opacity=0.2).encode(y=alt.Y("lo:Q", title="mean metric"), y2="hi:Q"),
        base.mark_line(point=True).encode(y="mean:Q"),
    ]
    data = curves
    if levels is not None:
        data = pd.concat([curves, levels.assign(level=levels["mean"]).drop(columns="mean")], ignore_index=True)
        layers.append(
            alt.Chart().transform_filter("isValid(datum.level)").mark_rule(strokeDash=[2, 3]).encode(
                y="level:Q", color="curve:N"
            )
        )
    return (
        alt.layer(*layers, data=data)
        .properties(width=230, height=150)
        .facet(facet=alt.Facet("panel:N", title=None), columns=2)
        .resolve_scale(y="independent")
    )
