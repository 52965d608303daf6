"""Render altair charts to static, deterministic SVG so executed notebooks and reports need no JavaScript or network."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any

import altair as alt
import vl_convert as vlc

from llmaudit.atomic import write_atomic

THEME = "llmaudit"
WIDTH = 560


@alt.theme.register(THEME, enable=False)
def _theme() -> alt.theme.ThemeConfig:
    """The book's one chart style: readable font sizes, slanted category labels and a fixed ~560px plot width."""
    return alt.theme.ThemeConfig(
        {
            "config": {
                "view": {"continuousWidth": WIDTH, "continuousHeight": 320, "discreteWidth": WIDTH},
                "font": "Helvetica, Arial, sans-serif",
                "title": {"fontSize": 17, "anchor": "start", "subtitleFontSize": 14, "offset": 10},
                "axis": {"labelFontSize": 13, "titleFontSize": 14, "titlePadding": 8, "labelLimit": 240},
                "axisXDiscrete": {"labelAngle": -45},
                "legend": {"labelFontSize": 13, "titleFontSize": 14, "labelLimit": 240},
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


def show(chart: alt.TopLevelMixin) -> SVGFigure:
    """Return the chart as a static SVG figure: make it a cell's last expression (or display() it) in a notebook."""
    return SVGFigure(to_svg(chart))


def save(chart: alt.TopLevelMixin, path: str | Path) -> Path:
    """Write the chart as a .svg file, creating parent folders."""
    path = Path(path)
    if path.suffix != ".svg":
        raise ValueError(f"chart path must end in .svg, got {path}")
    return write_atomic(path, to_svg(chart))
