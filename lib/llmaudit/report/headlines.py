"""The report's headline numbers: per chapter the few results its spec declares headline (`ChapterSpec.headlines`),
each with its interval where it has one, its unit and a line of meaning (for a number not measured: its note, why),
marked where it is an instrument gate's number that fails its gate (a test it gates is then not measurable); every
other number stays in results.csv and results.json in the report folder, which the section links instead of
printing."""

from __future__ import annotations

from dataclasses import dataclass
from html import escape
from typing import Any

import pandas as pd

from llmaudit.footnotes import UNEXPLAINED, Marks
from llmaudit.formats import interval, missing, number, signed
from llmaudit.registry import CHAPTERS
from llmaudit.report.results_json import NAME as RESULTS_JSON
from llmaudit.sections import Section
from llmaudit.verdict.gates import FAILED, GATES, Check, GateParams

RESULTS_CSV = "results.csv"
CSS = """
table.headlines { display: table; width: 100%; }
table.headlines td.label { width: 26%; }
table.headlines td.num { white-space: nowrap; }
table.headlines td.meaning { color: var(--muted); }
table.headlines .gate-failed { display: block; font-size: .75rem; font-weight: 600; color: #a40e26;
                               white-space: normal; }
""".strip()


@dataclass(frozen=True)
class HeadlineRow:
    """One headline number as the report shows it: label, value, interval ('' without one), unit, meaning, the
    gate it fails ('' where it is no gate's number or passes it) and why it has no value ('' where it has one)."""

    label: str
    value: str
    interval: str
    unit: str
    meaning: str
    failed_gate: str = ""
    why: str = ""


def failed_gate(name: str, row: Any, thresholds: Section) -> str:
    """The verdict page's text of the gate whose number `name` is ('{instrument}.{gate}') where it fails, else ''."""
    subject, _, quantity = name.partition(".")
    for gate in (g for g in GATES if g.name == quantity):
        value = row[gate.column]
        check = Check(gate, subject, None if pd.isna(value) else float(value), getattr(thresholds, gate.threshold))
        if check.state == FAILED:
            return check.text()
    return ""


def headline_rows(results: pd.DataFrame, thresholds: Section | None = None) -> dict[str, list[HeadlineRow]]:
    """Per chapter title, in book order, its declared headlines found in `results` (a Results.table()), gate
    numbers checked against `thresholds` (the card's gates; default: the params' defaults); chapters with none
    found are left out. A value with an interval is a score, printed as the verdict page prints scores."""
    thresholds = thresholds or GateParams()
    found = results.drop_duplicates("name", keep="last").set_index("name")
    chosen: dict[str, list[HeadlineRow]] = {}
    for spec in CHAPTERS:
        rows = []
        for h in spec.headlines:
            if h.name not in found.index:
                continue
            r = found.loc[h.name]
            bounds = "" if pd.isna(r.lo) or pd.isna(r.hi) else interval(r.lo, r.hi)
            if bounds and not pd.isna(r.n):
                bounds += f", n = {int(r.n)}"
            value = signed(r.value) if bounds else number(r.value)
            why = (r.note or UNEXPLAINED) if missing(r.value) else ""  # no value: why, in its note
            rows.append(HeadlineRow(h.label, value, bounds, h.unit, h.meaning, failed_gate(h.name, r, thresholds), why))
        if rows:
            chosen[spec.title] = rows
    return chosen


def _value(row: HeadlineRow, marks: Marks) -> str:
    """A headline value, marked where it fails its gate (the whole check in its tooltip) or is missing (its reason's
    footnote mark)."""
    if row.why:
        return marks.missing(row.why)
    if not row.failed_gate:
        return escape(row.value)
    return (f'{escape(row.value)}<span class="gate-failed" title="{escape(row.failed_gate)}">fails its gate: '
            f"{escape(row.failed_gate.split(': ', 1)[0])}</span>")


def headline_section(results: pd.DataFrame, card: dict[str, Any] | None = None) -> str:
    """The headline-numbers section, gate numbers checked against the model card's thresholds, with links to the
    full results files; '' where there is no result."""
    if results.empty:
        return ""
    thresholds = GateParams(**(card or {}).get("params", {}).get("gates", {}))
    tables = []
    for title, rows in headline_rows(results, thresholds).items():
        marks = Marks()
        body = "\n".join(
            f'<tr><td class="label">{escape(r.label)}</td><td class="num">{_value(r, marks)}</td>'
            f'<td class="num">{escape(r.interval)}</td><td>{escape(r.unit)}</td>'
            f'<td class="meaning">{escape(r.meaning)}</td></tr>'
            for r in rows
        )
        tables.append(f"<h3>{escape(title)}</h3>\n<table class=\"headlines\"><thead><tr><th>Result</th><th>Value</th>"
                      f"<th>95% CI</th><th>Unit</th><th>Meaning</th></tr></thead><tbody>\n{body}\n</tbody></table>"
                      + marks.html())
    files = (f'All {len(results)} numbers of this audit, with their notes: <a href="{RESULTS_CSV}">{RESULTS_CSV}</a> '
             f'and <a href="{RESULTS_JSON}">{RESULTS_JSON}</a> in this report\'s folder.')
    return ('<section id="summary"><h2>Headline numbers</h2>\n'
            f'<p>A few numbers per chapter that say whether its instruments work. {files}</p>\n'
            + "\n".join(tables) + "\n</section>")
