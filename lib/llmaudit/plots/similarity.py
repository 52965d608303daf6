"""Figures of the similarity chapter: bias scores per system and the pairwise similarity matrices."""

from __future__ import annotations

import altair as alt
import pandas as pd


def matrix(table: pd.DataFrame, title: str, domain: tuple[float, float] = (0.0, 1.0)) -> alt.Chart:
    """A square matrix (index and columns = systems) as a heatmap with the values written in."""
    long = table.rename_axis(index="row", columns="column").stack().rename("value").reset_index()
    base = alt.Chart(long).encode(
        x=alt.X("column:N", title=None, sort=list(table.columns)), y=alt.Y("row:N", title=None, sort=list(table.index))
    )
    return alt.layer(
        base.mark_rect().encode(color=alt.Color("value:Q", title=title, scale=alt.Scale(domain=list(domain)))),
        base.mark_text(fontSize=10).encode(
            text=alt.Text("value:Q", format=".2f"),
            color=alt.condition(f"datum.value > {(domain[0] + domain[1]) / 2}", alt.value("white"), alt.value("black")),
        ),
    ).properties(width=alt.Step(70), height=alt.Step(24))


def scores(table: pd.DataFrame) -> alt.Chart:
    """Bias scores s_DIS and s_AMB per category and system (columns category, system, score, value)."""
    return alt.Chart(table).mark_point(filled=True, size=45).encode(
        x=alt.X("value:Q", title="bias score (−100 anti-stereotypical … +100 stereotypical)",
                scale=alt.Scale(domain=[-100, 100])),
        y=alt.Y("category:N", title=None), yOffset="system:N", color=alt.Color("system:N", title=None),
        shape=alt.Shape("score:N", title=None),
    ).properties(width=420, height=alt.Step(16))
