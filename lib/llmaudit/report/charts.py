"""Render altair charts to static, deterministic SVG so executed notebooks and reports need no JavaScript or network;
a chart with nothing to plot is shown as one sentence saying why, never as an empty grid."""

from __future__ import annotations

import hashlib
import re
import textwrap
from collections.abc import Iterator
from html import escape
from pathlib import Path
from typing import Any

import altair as alt
import vl_convert as vlc

from llmaudit.atomic import write_atomic

THEME = "llmaudit"
WIDTH = 560
NO_DATA = "application/vnd.llmaudit.no-data+json"  # the output of a figure with nothing to plot: {"reason": ...}
NOTHING = "Nothing to draw: every value this figure would plot is missing."  # a reason where the caller gives none


@alt.theme.register(THEME, enable=False)
def _theme() -> alt.theme.ThemeConfig:
    """The book's one chart style: readable font sizes, slanted category labels, a fixed ~560px plot width and
    legends below the plot."""
    return alt.theme.ThemeConfig(
        {
            "config": {
                "view": {"continuousWidth": WIDTH, "continuousHeight": 320, "discreteWidth": WIDTH},
                "font": "Helvetica, Arial, sans-serif",
                "title": {"fontSize": 17, "anchor": "start", "subtitleFontSize": 14, "offset": 10},
                "axis": {"labelFontSize": 13, "titleFontSize": 14, "titlePadding": 8, "labelLimit": 240},
                "axisXDiscrete": {"labelAngle": -45},
                # below the plot, in two columns: on a phone, where a figure keeps its drawn size and scrolls
                # sideways, a legend on the right was off screen while the plot was read
                "legend": {"labelFontSize": 13, "titleFontSize": 14, "labelLimit": 240, "orient": "bottom",
                           "direction": "vertical", "columns": 2},
                "header": {"labelFontSize": 14, "titleFontSize": 14},
            }
        }
    )


class SVGFigure:
    """A rendered chart: displays as image/svg+xml in Jupyter, with a short text/plain fallback."""

    def __init__(self, svg: str) -> None:
        self.svg = svg

    def _repr_svg_(self) -> str:
        return self.svg

    def __repr__(self) -> str:
        return f"<SVGFigure {len(self.svg)} chars>"


class NoFigure:
    """A figure with nothing to plot: one sentence saying why, as a small SVG (the book), the report's own output
    (`NO_DATA`: the report shows the sentence in place of the figure and its caption) and plain text."""

    def __init__(self, reason: str) -> None:
        self.reason = reason

    def _repr_mimebundle_(self, include=None, exclude=None) -> dict[str, Any]:
        lines = textwrap.wrap(self.reason, 80)
        text = "".join(f'<text x="8" y="{22 * (i + 1)}">{escape(line)}</text>' for i, line in enumerate(lines))
        svg = (f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{22 * len(lines) + 10}" '
               f'font-family="Helvetica, Arial, sans-serif" font-size="14" fill="#555">{text}</svg>')
        return {NO_DATA: {"reason": self.reason}, "image/svg+xml": svg, "text/plain": self.reason}

    def __repr__(self) -> str:
        return self.reason


def _sources(spec: Any) -> Iterator[list[Any]]:
    """The rows of each inline data source of a Vega-Lite spec: its named datasets and inline values, nested views
    included."""
    if isinstance(spec, dict):
        for key, value in spec.items():
            if key == "datasets" and isinstance(value, dict):
                yield from (rows for rows in value.values() if isinstance(rows, list))
            elif key == "data" and isinstance(value, dict) and isinstance(value.get("values"), list):
                yield value["values"]
            else:
                yield from _sources(value)
    elif isinstance(spec, list):
        for item in spec:
            yield from _sources(item)


def plotted(spec: dict[str, Any]) -> bool:
    """Whether a chart's spec has something to plot: a data row with a number (altair writes NaN as null); a spec
    without inline data (a URL, a generator) is taken to have some."""
    sources = list(_sources(spec))
    return not sources or any(isinstance(v, (int, float)) and not isinstance(v, bool)
                              for rows in sources for row in rows if isinstance(row, dict) for v in row.values())


_ID = re.compile(r'\bid="([^"]+)"')


def normalise_ids(svg: str) -> str:
    """Renumber element ids (vega's global clip/gradient counters) by order of appearance, prefixed by a content hash.

    Counters make two renders of one chart differ; the hash prefix keeps ids unique when SVGs share one HTML page.
    """
    ids = list(dict.fromkeys(_ID.findall(svg)))
    if not ids:
        return svg
    refs = re.compile(r'(\bid="|url\(#|href="#)(' + "|".join(map(re.escape, ids)) + r')(?=["\)])')
    numbered = {old: f"n{i}" for i, old in enumerate(ids)}
    plain = refs.sub(lambda m: m[1] + numbered[m[2]], svg)
    prefix = "v" + hashlib.sha256(plain.encode()).hexdigest()[:8]
    return refs.sub(lambda m: f"{m[1]}{prefix}-{numbered[m[2]]}", svg)


def spec_to_svg(spec: dict[str, Any]) -> str:
    """Render a Vega-Lite spec offline (no external data URLs, fixed en-US locale) to normalised SVG."""
    svg = vlc.vegalite_to_svg(spec, allowed_base_urls=[], format_locale="en-US", time_format_locale="en-US")
    return normalise_ids(svg)


def to_svg(chart: alt.TopLevelMixin) -> str:
    """Render an altair chart in the book's theme to SVG text; the chart's own config wins over the theme."""
    with alt.theme.enable(THEME):
        spec = chart.to_dict()
    return spec_to_svg(spec)


def show(chart: alt.TopLevelMixin, *, empty: str = NOTHING) -> SVGFigure | NoFigure:
    """Return the chart as a static SVG figure: make it a cell's last expression (or display() it) in a notebook.
    A chart with nothing to plot is shown as the sentence `empty`, which says why (vega would draw an empty grid,
    or an SVG 1.8e308 px wide)."""
    with alt.theme.enable(THEME):
        spec = chart.to_dict()
    return SVGFigure(spec_to_svg(spec)) if plotted(spec) else NoFigure(empty)


def save(chart: alt.TopLevelMixin, path: str | Path) -> Path:
    """Write the chart as a .svg file, creating parent folders."""
    path = Path(path)
    if path.suffix != ".svg":
        raise ValueError(f"chart path must end in .svg, got {path}")
    return write_atomic(path, to_svg(chart))
