"""Figures of the similarity chapter: bias scores per system, the pairwise similarity matrices, CKA across depths and
StereoSet's stereotype scores."""

from __future__ import annotations

import altair as alt
import pandas as pd

WRITTEN = 12  # a matrix with more rows or columns (every block's CKA) is drawn without its values written in


def matrix(table: pd.DataFrame, title: str, domain: tuple[float, float] = (0.0, 1.0)) -> alt.LayerChart:
    """A matrix (index and columns: systems, or one system's depths) as a heatmap with the values written in (up to
    WRITTEN rows and columns; beyond, smaller cells read by their colour alone), a pair not measured left blank; named
    axes (e.g. two models' depths) are titled."""
    table = table.rename(index=str, columns=str)
    written = max(table.shape) <= WRITTEN
    # a pair not measured (NaN) is left blank, not written as "null"
    long = table.rename_axis(index="row", columns="column").stack().rename("value").dropna().reset_index()
    base = alt.Chart(long).encode(
        x=alt.X("column:N", title=table.columns.name, sort=list(table.columns)),
        y=alt.Y("row:N", title=table.index.name, sort=list(table.index)),
    )
    cells = base.mark_rect().encode(color=alt.Color("value:Q", title=title, scale=alt.Scale(domain=list(domain))))
    if not written:
        return alt.LayerChart(layer=[cells]).properties(width=alt.Step(14), height=alt.Step(14))
    return alt.LayerChart(layer=[cells, base.mark_text(fontSize=10).encode(
        text=alt.Text("value:Q", format=".2f"),
        color=alt.condition(f"datum.value > {(domain[0] + domain[1]) / 2}", alt.value("white"), alt.value("black")),
    )]).properties(width=alt.Step(70), height=alt.Step(24))


def scores(table: pd.DataFrame) -> alt.Chart:
    """Bias scores s_DIS and s_AMB per category and system (columns category, system, score, value)."""
    return alt.Chart(table).mark_point(filled=True, size=45).encode(
        x=alt.X("value:Q", title="bias score (−100 anti-stereotypical … +100 stereotypical)",
                scale=alt.Scale(domain=[-100, 100])),
        y=alt.Y("category:N", title=None), yOffset="system:N", color=alt.Color("system:N", title=None),
        shape=alt.Shape("score:N", title=None),
    ).properties(width=420, height=alt.Step(16))


def depth_matrices(tables: dict[str, pd.DataFrame], rows: str) -> alt.VConcatChart:
    """One `matrix` per compared system of CKA across depths (rows: the depths of system `rows`), stacked."""
    return alt.vconcat(*(matrix(table.rename_axis(index=f"{rows}, relative depth", columns=f"{name}, relative depth"),
                                "linear CKA") for name, table in tables.items()))


def stereotype_scores(table: pd.DataFrame) -> alt.Chart:
    """StereoSet's stereotype score per bias type and system (columns bias_type, system, ss), with the no-preference
    line at 50."""
    points = alt.Chart(table).mark_point(filled=True, size=50).encode(
        x=alt.X("ss:Q", title="stereotype score (0 anti-stereotypical … 100 stereotypical)",
                scale=alt.Scale(domain=[0, 100])),
        y=alt.Y("bias_type:N", title=None), yOffset="system:N", color=alt.Color("system:N", title=None),
        tooltip=["bias_type", "system", "ss"],
    )
    return (points + alt.Chart(pd.DataFrame({"ss": [50.0]})).mark_rule(strokeDash=[4, 4]).encode(x="ss:Q")).properties(
        width=420, height=alt.Step(16))
