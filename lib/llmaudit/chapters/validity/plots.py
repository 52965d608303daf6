"""Figures of the validity chapter: name projections against the female share (paper Fig. 3, top), the
bad-credit rate per female-share bin (Fig. 3, bottom) and Sobol' indices per perturbation (Tables 4 and 7)."""

from __future__ import annotations

import altair as alt
import pandas as pd

P_F = alt.X("p_f:Q", title="female share of births with the name (p_f)", scale=alt.Scale(domain=[0, 1]))


def projections(names: pd.DataFrame, means_of: pd.DataFrame | None = None) -> alt.LayerChart:
    """Each name's projection on the gender vector against p_f (columns name, p_f, projection, bin), with the bin
    means of `means_of` (default: the same names; averaged here, so thousands of names stay a line of 11 points)
    drawn as a line."""
    points = alt.Chart(names).mark_circle(size=14, opacity=0.35).encode(
        x=P_F, y=alt.Y("projection:Q", title="projection on v (− male, + female)"), tooltip=["name", "p_f"]
    )
    binned = (names if means_of is None else means_of).groupby("bin", as_index=False)["projection"].mean()
    means = alt.Chart(binned).mark_line(point=True, color="black").encode(x=alt.X("bin:Q"), y="projection:Q")
    return alt.LayerChart(layer=[points, means]).properties(width=480, height=260)


def rate_by_bin(rates: pd.DataFrame, baseline: pd.DataFrame) -> alt.LayerChart:
    """Mean metric per p_f bin with a 95% band, one line per ground-truth label (columns bin, label, mean, lo, hi);
    `baseline` (columns label, mean) draws the profiles without gender or name as dashed lines."""
    color = alt.Color("label:N", title="true credit risk")
    x = alt.X("bin:Q", title="p_f bin of the inserted name", scale=alt.Scale(domain=[0, 1]))
    base = alt.Chart(rates).encode(x=x, color=color)
    return alt.LayerChart(layer=[
        base.mark_area(opacity=0.15).encode(y=alt.Y("lo:Q", title="bad credit rate"), y2="hi:Q"),
        base.mark_line(point=True).encode(y="mean:Q"),
        alt.Chart(baseline).mark_rule(strokeDash=[4, 4]).encode(y="mean:Q", color=color),
    ]).properties(width=480, height=220)


def sobol(table: pd.DataFrame) -> alt.FacetChart:
    """First-order indices with intervals per variable and perturbation, one panel per task (columns task,
    variable, method, value, lo, hi)."""
    base = alt.Chart().encode(
        y=alt.Y("variable:N", title=None, sort="-x"), yOffset=alt.YOffset("method:N", sort=None),
        color=alt.Color("method:N", title=None, sort=None),
    )
    return alt.layer(
        base.mark_rule().encode(x=alt.X("lo:Q", title="first-order Sobol' index Sob_i"), x2="hi:Q"),
        base.mark_point(filled=True, size=30).encode(x="value:Q", tooltip=["variable", "method", "value", "lo", "hi"]),
        data=table,
    ).properties(width=420, height=alt.Step(7)).facet(row=alt.Row("task:N", title=None)).resolve_scale(y="independent")
