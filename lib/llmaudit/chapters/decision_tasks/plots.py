"""Figures of the decision-tasks and robustness chapters."""

from __future__ import annotations

from collections.abc import Mapping

import altair as alt
import pandas as pd

from llmaudit.chapters.greyed import greyed

UNITS = {  # per kind of estimate, its panel's axis: what it measures and in which unit
    "black-box": "black-box gap: difference of the metric between the groups' prompts",
    "white-box": "white-box slope: change of the metric per unit λ",
}


def kind(method: str) -> str:
    """The kind of an estimate by its method label: 'black-box', 'white-box', or 'other'."""
    return next((k for k in UNITS if method.startswith(k)), "other")


def _domain(rows: pd.DataFrame, epsilon: float | None) -> list[float]:
    """An x domain holding every point, every interval and the band, with 5% room on each side."""
    values = pd.concat([rows["value"], rows["lo"], rows["hi"]]).dropna().tolist() + [0.0]
    if epsilon is not None:
        values += [-epsilon, epsilon]
    low, high = min(values), max(values)
    room = 0.05 * (high - low or 1.0)
    return [low - room, high + room]


def _panel(rows: pd.DataFrame, title: str, epsilon: float | None, colours: alt.Scale, order: list[str]
           ) -> alt.LayerChart:
    """One kind of estimate on its own axis: points with interval whiskers per task and method, the zero line and
    the band |S| <= epsilon."""
    x = alt.Scale(domain=_domain(rows, epsilon), nice=False, zero=False)
    base = alt.Chart(rows).encode(
        y=alt.Y("task:N", title=None, sort=order),
        yOffset=alt.YOffset("method:N"),
        color=alt.Color("shown:N", title=None, scale=colours),
    )
    layers = []
    if epsilon is not None:
        band = pd.DataFrame({"lo": [-epsilon], "hi": [epsilon]})
        layers.append(alt.Chart(band).mark_rect(color="#e8f3e8").encode(x=alt.X("lo:Q", scale=x), x2="hi:Q"))
    layers += [
        alt.Chart(pd.DataFrame({"x": [0.0]})).mark_rule(color="gray").encode(x=alt.X("x:Q", scale=x)),
        base.mark_rule(strokeWidth=2).encode(x=alt.X("lo:Q", title=title, scale=x), x2="hi:Q"),
        base.mark_point(filled=True, size=50).encode(x=alt.X("value:Q", scale=x),
                                                    tooltip=["task", "method", "value", "lo", "hi"]),
    ]
    return alt.LayerChart(layer=layers).properties(width=480, height=alt.Step(14))


def estimates(table: pd.DataFrame, title: str, epsilon: float | Mapping[str, float] | None = None
              ) -> alt.TopLevelMixin:
    """Point estimates with interval whiskers per task and method (columns task, method, value, lo, hi, and
    optionally verdict), with a zero line and, if given, the invariance band |S| <= epsilon shaded (`epsilon`: one
    margin, or one per kind of estimate). Black-box gaps and white-box slopes differ in unit, so each kind gets its
    own panel and axis (`UNITS`; other methods: `title`); every axis holds all its intervals; a test whose verdict is
    not measurable is drawn grey, with a legend entry."""
    shown, colours = greyed(table["method"], table["verdict"] if "verdict" in table else None)
    shown = table.assign(shown=shown)
    order = list(dict.fromkeys(table["task"]))
    kinds = table["method"].map(kind)
    panels = [_panel(shown[kinds == k], UNITS.get(str(k), title),
                     epsilon.get(str(k)) if isinstance(epsilon, Mapping) else epsilon, colours, order)
              for k in dict.fromkeys(kinds)]
    return panels[0] if len(panels) == 1 else alt.vconcat(*panels, spacing=24)


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
