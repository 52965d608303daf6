"""Figures of the decision-tasks and robustness chapters."""

from __future__ import annotations

from collections.abc import Mapping

import altair as alt
import numpy as np
import pandas as pd

from llmaudit.chapters.greyed import PALETTE, greyed, shapes

LAMBDA = "λ (− male / White, + female / Black)"
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


def _panel(rows: pd.DataFrame, title: str, epsilon: float | None, colours: alt.Scale, shape: alt.Shape,
           order: list[str]) -> alt.LayerChart:
    """One kind of estimate on its own axis: points with interval whiskers per task and method, the zero line and
    the band |S| <= epsilon; at most five ticks, so the labels of a narrow white-box range never touch."""
    x = alt.Scale(domain=_domain(rows, epsilon), nice=False, zero=False)
    axis = alt.Axis(tickCount=5, labelOverlap="greedy", labelFlush=True)
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
        base.mark_rule(strokeWidth=2).encode(x=alt.X("lo:Q", title=title, scale=x, axis=axis), x2="hi:Q"),
        base.mark_point(filled=True, size=60, opacity=1).encode(x=alt.X("value:Q", scale=x), shape=shape,
                                                               tooltip=["task", "method", "value", "lo", "hi"]),
    ]
    return alt.LayerChart(layer=layers).properties(width=360, height=alt.Step(16))


def estimates(table: pd.DataFrame, title: str, epsilon: float | Mapping[str, float] | None = None
              ) -> alt.TopLevelMixin:
    """Point estimates with interval whiskers per task and method (columns task, method, value, lo, hi, and
    optionally verdict), with a zero line and, if given, the invariance band |S| <= epsilon shaded (`epsilon`: one
    margin, or one per kind of estimate). Black-box gaps and white-box slopes differ in unit, so each kind gets its
    own panel and axis (`UNITS`; other methods: `title`); every axis holds all its intervals; a test whose verdict is
    not measurable is drawn grey, with a legend entry, and keeps its method's shape; no rows: an empty chart."""
    if table.empty:  # no estimate (an endpoint's sampled answers named no answer word): `show` says so
        return alt.Chart(table).mark_point()
    shown, colours = greyed(table["method"], table["verdict"] if "verdict" in table else None)
    shape = shapes(table["method"], "method", "test (by shape)")
    shown = table.assign(shown=shown)
    order = list(dict.fromkeys(table["task"]))
    kinds = table["method"].map(kind)
    panels = [_panel(shown[kinds == k], UNITS.get(str(k), title),
                     epsilon.get(str(k)) if isinstance(epsilon, Mapping) else epsilon, colours, shape, order)
              for k in dict.fromkeys(kinds)]
    return panels[0] if len(panels) == 1 else alt.vconcat(*panels, spacing=24)


def _kind_layer(data: pd.DataFrame, kind: str, names: list[str], first: int, legend: bool) -> alt.LayerChart:
    """One kind of curve in one panel: its lines with their 95% bands and its dotted group means, the kind's curves
    (`names`, in every panel) in palette colours from `first` on, with the kind's legend (swatches at full opacity)
    where `legend`."""
    scale = alt.Scale(domain=names, range=[PALETTE[(first + i) % len(PALETTE)] for i in range(len(names))])
    shown = alt.Legend(symbolOpacity=1, symbolType="stroke") if legend else None
    colour = alt.Color("curve:N", title=kind, scale=scale, legend=shown)
    rows = alt.Chart(data[data["kind"] == kind]).encode(color=colour)
    line = rows.transform_filter("isValid(datum.lo)").encode(x=alt.X("lam:Q", title=LAMBDA))
    return alt.LayerChart(layer=[
        line.mark_line(point=True).encode(y=alt.Y("mean:Q", title="task metric (mean over cases)")),
        line.mark_area(opacity=0.2).encode(y="lo:Q", y2="hi:Q"),
        rows.transform_filter("isValid(datum.level)").mark_rule(strokeDash=[2, 3]).encode(y="level:Q"),
    ])


def sweep_curves(curves: pd.DataFrame, levels: pd.DataFrame | None = None) -> alt.ConcatChart:
    """Mean task metric against lambda with a 95% band, one panel per task and one line per `curve` (a vector, or a
    speaker group as in the main paper's Fig. 2) (columns panel, curve, kind, lam, mean, lo, hi); `levels` (columns
    panel, curve, kind, mean) draws the black-box group means as dotted lines in their group's colour. Each kind of
    curve (steering vector, speakers, stated group) has one legend, in the first panel that draws it, and colours of
    its own."""
    data = curves if levels is None else pd.concat(
        [curves, levels.assign(level=levels["mean"]).drop(columns="mean")], ignore_index=True)
    names = {kind: list(dict.fromkeys(rows["curve"])) for kind, rows in data.groupby("kind", sort=False)}
    first = dict(zip(names, [0, *np.cumsum([len(curves) for curves in names.values()])[:-1]], strict=True))
    panels, legended = [], set()
    for panel, rows in data.groupby("panel", sort=False):
        own = list(dict.fromkeys(rows["kind"]))
        layers = [_kind_layer(rows, kind, names[kind], int(first[kind]), kind not in legended) for kind in own]
        legended.update(own)
        panels.append(alt.layer(*layers, title=alt.Title(str(panel), fontSize=14, fontWeight="normal"))
                      .resolve_scale(color="independent").properties(width=230, height=150))
    return alt.concat(*panels, columns=2)
