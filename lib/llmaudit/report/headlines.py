"""The report's headline numbers: per chapter the few results its spec declares headline (`ChapterSpec.headlines`),
each with its interval where it has one, its unit and a line of meaning; every other number stays in results.csv and
results.json in the report folder, which the section links instead of printing."""

from __future__ import annotations

import math
from dataclasses import dataclass
from html import escape

import pandas as pd

from llmaudit.registry import CHAPTERS
from llmaudit.report.results_json import NAME as RESULTS_JSON

RESULTS_CSV = "results.csv"
CSS = """
table.headlines { display: table; width: 100%; }
table.headlines td.label { width: 26%; }
table.headlines td.num { white-space: nowrap; }
table.headlines td.meaning { color: var(--muted); }
""".strip()


@dataclass(frozen=True)
class HeadlineRow:
    """One headline number as the report shows it: label, value, interval ('' without one), unit and meaning."""

    label: str
    value: str
    interval: str
    unit: str
    meaning: str


def _number(x: object) -> str:
    """A value for reading: numbers to 3 significant digits (whole past 10^4), text as recorded, missing as 'n/a'."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "n/a"
    if isinstance(x, (int, float)) and not isinstance(x, bool):
        return f"{x:.3g}" if abs(x) < 1e4 else f"{x:.0f}"
    return str(x)


def headline_rows(results: pd.DataFrame) -> dict[str, list[HeadlineRow]]:
    """Per chapter title, in book order, its declared headlines found in `results` (a Results.table()); chapters
    with none found are left out."""
    found = results.drop_duplicates("name", keep="last").set_index("name")
    chosen: dict[str, list[HeadlineRow]] = {}
    for spec in CHAPTERS:
        rows = []
        for h in spec.headlines:
            if h.name not in found.index:
                continue
            r = found.loc[h.name]
            interval = "" if pd.isna(r.lo) or pd.isna(r.hi) else f"[{_number(r.lo)}, {_number(r.hi)}]"
            if interval and not pd.isna(r.n):
                interval += f", n = {int(r.n)}"
            rows.append(HeadlineRow(h.label, _number(r.value), interval, h.unit, h.meaning))
        if rows:
            chosen[spec.title] = rows
    return chosen


def headline_section(results: pd.DataFrame) -> str:
    """The headline-numbers section, with links to the full results files; '' where there is no result."""
    if results.empty:
        return ""
    tables = []
    for title, rows in headline_rows(results).items():
        body = "\n".join(
            f'<tr><td class="label">{escape(r.label)}</td><td class="num">{escape(r.value)}</td>'
            f'<td class="num">{escape(r.interval)}</td><td>{escape(r.unit)}</td>'
            f'<td class="meaning">{escape(r.meaning)}</td></tr>'
            for r in rows
        )
        tables.append(f"<h3>{escape(title)}</h3>\n<table class=\"headlines\"><thead><tr><th>Result</th><th>Value</th>"
                      f"<th>95% CI</th><th>Unit</th><th>Meaning</th></tr></thead><tbody>\n{body}\n</tbody></table>")
    files = (f'All {len(results)} numbers of this audit, with their notes: <a href="{RESULTS_CSV}">{RESULTS_CSV}</a> '
             f'and <a href="{RESULTS_JSON}">{RESULTS_JSON}</a> in this report\'s folder.')
    return ('<section id="summary"><h2>Headline numbers</h2>\n'
            f'<p>A few numbers per chapter that say whether its instruments work. {files}</p>\n'
            + "\n".join(tables) + "\n</section>")
