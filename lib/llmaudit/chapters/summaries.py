"""Charts that stay small at any size: a figure embeds its data, so thousands of points (the papers' sizes give tens of
thousands) are summarised before they are drawn. Box plots draw five numbers per box computed here, exactly; scatter
plots draw a seeded sample of at most `POINTS` per panel and say so."""

from __future__ import annotations

from typing import Any

import altair as alt
import pandas as pd

POINTS = 1000  # at most this many points per scatter panel: the cloud's shape is clear and the figure stays light


def sample_per(frame: pd.DataFrame, by: str, n: int = POINTS, seed: int = 0) -> pd.DataFrame:
    """At most `n` rows of each `by` group (all of a smaller group), drawn with `seed`, in the frame's order."""
    kept = [group.sample(n=min(n, len(group)), random_state=seed) for _, group in frame.groupby(by, sort=False)]
    return pd.concat(kept).sort_index() if kept else frame


def shown_note(frame: pd.DataFrame, by: str, n: int = POINTS) -> str:
    """'' when every row is drawn, else a subtitle saying how many of how many points a panel shows."""
    largest = int(frame.groupby(by).size().max()) if len(frame) else 0
    return "" if largest <= n else f"a random {n} points per panel of up to {largest}"


def five_numbers(frame: pd.DataFrame, by: list[str], value: str) -> pd.DataFrame:
    """Per `by` group: min, first quartile, median, third quartile and max of `value`, and the group's size `n`."""
    grouped = frame.groupby(by, sort=False)[value]
    return pd.DataFrame({
        "min": grouped.min(), "q1": grouped.quantile(0.25), "median": grouped.median(),
        "q3": grouped.quantile(0.75), "max": grouped.max(), "n": grouped.size(),
    }).reset_index()


def boxes(stats: pd.DataFrame, group: str, title: str, horizontal: bool = False, color: str | None = None,
          ) -> alt.LayerChart:
    """Box plots of `five_numbers` output, one per `group` value: a whisker from min to max, a box from q1 to q3 and a
    tick at the median, on a value axis titled `title` (horizontal: groups down the y axis); facet it like any chart."""
    value, along, across = (alt.X, "x", "y") if horizontal else (alt.Y, "y", "x")
    encoding: dict[str, Any] = {across: (alt.Y if horizontal else alt.X)(f"{group}:N", title=None),
                                "tooltip": [f"{group}:N", "n:Q", "min:Q", "q1:Q", "median:Q", "q3:Q", "max:Q"]}
    if color is not None:
        encoding["color"] = alt.Color(f"{color}:N", legend=None)
    base = alt.Chart().encode(**encoding)
    return alt.LayerChart(layer=[
        base.mark_rule().encode(**{along: value("min:Q", title=title), f"{along}2": "max:Q"}),
        base.mark_bar(size=14).encode(**{along: "q1:Q", f"{along}2": "q3:Q"}),
        base.mark_tick(color="white", thickness=2, size=14).encode(**{along: "median:Q"}),
    ], data=stats)
