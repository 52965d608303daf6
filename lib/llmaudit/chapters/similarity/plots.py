"""Figures of the similarity chapter: bias scores per system, the pairwise similarity matrices, CKA across depths and
StereoSet's stereotype scores."""

from __future__ import annotations

import altair as alt
import pandas as pd

CELL_FONT = 12  # px, the values written in the cells
CELL = (70, 24)  # px, a cell's width and height: room for a value like 0.987 at CELL_FONT
VALUE_FORMAT = ".3f"  # similarities near 1 differ in the third decimal
WRITTEN = 12  # a matrix with more rows or columns (every block's CKA) is drawn without its values written in
SMALL_CELL = 14  # px, a cell's side in such a matrix, read by its colour alone


def matrix(table: pd.DataFrame, title: str, domain: tuple[float, float] = (0.0, 1.0)) -> alt.LayerChart:
    """A matrix (index and columns: systems, or one system's depths) as a heatmap with the values written in (up to
    WRITTEN rows and columns; beyond, smaller cells read by their colour alone), a pair not measured left blank.
    Labels are never cut and never collide: the axes carry no titles (what the rows and columns are, where named, is
    said under the legend's title), row labels have no length limit and column labels are slanted."""
    table = table.rename(index=str, columns=str)
    written = max(table.shape) <= WRITTEN
    # a pair not measured (NaN) is left blank, not written as "null"
    long = table.rename_axis(index="row", columns="column").stack().rename("value").dropna().reset_index()
    named = [f"{part}: {name}" for part, name in (("rows", table.index.name), ("columns", table.columns.name)) if name]
    base = alt.Chart(long).encode(
        x=alt.X("column:N", sort=list(table.columns), axis=alt.Axis(labelAngle=-45, labelLimit=0, title=None)),
        y=alt.Y("row:N", sort=list(table.index), axis=alt.Axis(labelLimit=0, title=None)),
    )
    cells = base.mark_rect().encode(color=alt.Color("value:Q", title=[title, *named] if named else title,
                                                    scale=alt.Scale(domain=list(domain))))
    if not written:
        return alt.LayerChart(layer=[cells]).properties(width=alt.Step(SMALL_CELL), height=alt.Step(SMALL_CELL))
    return alt.LayerChart(layer=[cells, base.mark_text(fontSize=CELL_FONT).encode(
        text=alt.Text("value:Q", format=VALUE_FORMAT),
        color=alt.condition(f"datum.value > {(domain[0] + domain[1]) / 2}", alt.value("white"), alt.value("black")),
    )]).properties(width=alt.Step(CELL[0]), height=alt.Step(CELL[1]))


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
