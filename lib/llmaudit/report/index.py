"""The cross-model index: every audited model under reports/ with its verdicts side by side, as a page of the
book (index.md) and as a self-contained HTML page (index.html). Built from the report folders' files alone, so
every string in them (folder names above all) is escaped for the page it goes into."""

from __future__ import annotations

from html import escape
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pandas as pd

from llmaudit.atomic import write_atomic
from llmaudit.errors import AuditError
from llmaudit.formats import estimate
from llmaudit.registry import CHAPTERS
from llmaudit.report.audited import Audited, read_audited
from llmaudit.report.bottom_line import RULES, BottomLine, bottom_line
from llmaudit.report.charts import to_svg
from llmaudit.report.comparison import FOLDER as COMPARE_FOLDER
from llmaudit.report.comparison_files import comparison_pages, page_label
from llmaudit.report.figure_markup import accessible
from llmaudit.report.front import CSS as FRONT_CSS
from llmaudit.report.front import badge
from llmaudit.report.html import CSS, sanitise
from llmaudit.report.markdown import render_inline
from llmaudit.report.myst import literal, raw_html
from llmaudit.spec import IndexFigure
from llmaudit.verdict.gates import NOT_CHECKED
from llmaudit.verdict.verdicts import NOT_MEASURABLE

Shown = list[tuple[IndexFigure, str]]  # each chapter's index section with its charts as inline SVG
INTRO = ("Each column is one model's audit (its report: `reports/<model>/report.html`); each row one invariance test. "
         "A cell gives the verdict against that model's epsilon and gate thresholds (not measurable: the test's "
         "instrument failed a gate on that model) and the score with its 95% interval.")
LEAD = ("The chapters explained each test on the default model; this page puts every audited model's verdicts side "
        "by side, one column per model, its header linking that model's own report (verdict page, model card, the "
        "cases behind each test). Read a row across the models to see whether a requirement holds for all of them, "
        "and a column down to see one model's audit at a glance. A cell that reads \"not run\" is a test that model's "
        "audit did not run.")
BADGED = frozenset({"pass", "fail", "inconclusive", NOT_MEASURABLE})  # the verdicts a cell shows as a coloured badge
NOT_RUN = "not run"  # a cell whose model's audit did not run the test
COMPARE = ("Two audited models compared test by test on the cases both drew (`llmaudit compare A B`): "
           "D = |score A| - |score B| with a paired bootstrap interval, tied or one model more biased against epsilon.")


def audited(reports: Path, own: Audited | None = None) -> tuple[dict[str, pd.DataFrame], list[str]]:
    """Verdict tables of every report folder that has a model card and a results file, by model name (the `own`
    folder's, the one just audited, as its run read it); and, for each other folder whose files are damaged, why it
    was left out (one bad folder never stops another model's index)."""
    found, skipped = {}, []
    for folder in sorted(p for p in Path(reports).iterdir() if p.is_dir()):
        try:
            read = own if own is not None and folder.name == own.folder.name else read_audited(folder)
            if read.complete:
                found[folder.name] = read.verdicts
        except AuditError as err:
            skipped.append(f"{folder.name}: {err}")
    return found, skipped


def figures(reports: Path, models: list[str], own: str | None = None) -> tuple[Shown, list[str]]:
    """Each chapter's index section (`ChapterSpec.index`) with its charts, each a <figure> of one labelled image and
    its caption ('Figure N.' and the chart's title), for those with any chart of the audited `models`; and why a model
    was left out of one (its damaged or copied files)."""
    found, skipped = [], []
    for section in (spec.index for spec in CHAPTERS if spec.index is not None):
        charts, left_out = section.charts(reports, models, own)
        skipped += left_out
        if charts:
            found.append((section, "\n".join(_captioned(chart, i) for i, chart in enumerate(charts, start=1))))
    return found, skipped


def _captioned(chart: Any, number: int) -> str:
    """A chart as a <figure>: one image labelled by its caption, 'Figure N.' and the chart's title."""
    caption = f"Figure {number}. {getattr(chart, 'title', '')}."
    return f"<figure>{accessible(sanitise(to_svg(chart)), caption)}<figcaption>{escape(caption)}</figcaption></figure>"


def side_by_side(tables: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """(requirement, test) rows by model columns; a cell is (verdict, score, lo, hi, gate state) or missing."""
    cells = {
        model: {(r.requirement, r.test): (r.verdict, r.score, r.lo, r.hi, r.gate)
                for r in table.itertuples(index=False)}
        for model, table in tables.items()
    }
    keys = list(dict.fromkeys(key for table in cells.values() for key in table))
    return pd.DataFrame({model: [found.get(key) for key in keys] for model, found in cells.items()},
                        index=pd.MultiIndex.from_tuples(keys, names=["requirement", "test"]) if keys else None)


def _score(cell: tuple) -> str:
    return estimate(cell[1], cell[2], cell[3])


def _unchecked(cell: tuple) -> str:
    return " (gate not checked)" if cell[4] == NOT_CHECKED else ""


def _cell_text(cell: tuple | None) -> str:
    """A book cell: the verdict as a coloured badge (a verdict the audit does not give stays inert text), a note
    where the gate was not checked, the score and its interval; "not run" where the model has no such test."""
    if cell is None:
        return NOT_RUN
    shown = badge(cell[0]) if cell[0] in BADGED else literal(cell[0])
    return f"{shown}{literal(_unchecked(cell))} {_score(cell)}"


def _report_link(model: str) -> str:
    """A model column's header: its name linking its report as a plain <a> tag, which the browser opens (a Markdown
    link to a local file becomes a Sphinx download; `runner.bookreports` copies the report where the tag points),
    the folder's name percent-quoted in the path and escaped as text."""
    return f'<a href="{escape(quote(model, safe=""))}/report.html">{literal(model)}</a>'


def _markdown(grid: pd.DataFrame, shown: Shown, skipped: list[str], said: dict[str, BottomLine]) -> str:
    """The index as a MyST page of the book (the chapters' figures as inline SVG), naming the folders left out: a
    lead paragraph, each model's bottom line (`said`) linking its report, then one row per test with the requirement
    named on its first test's row only."""
    lines = ["# Audited models", "", LEAD, "", INTRO, ""]
    lines += [f"Left out: {literal(reason)}" for reason in skipped] + ([""] if skipped else [])
    if said:
        lines += ["## Bottom line per model", ""]
        lines += [f"- {_report_link(model)}: {literal(line.sentence.removeprefix(f'{model}: '))}"
                  for model, line in said.items()]
        lines += ["", literal(RULES), ""]
    if grid.empty:
        return "\n".join([*lines, "No model has been audited yet: run `make audit`.", ""])
    models = " | ".join(map(_report_link, grid.columns))
    lines += [f"| Requirement | Test | {models} |", "|---|---|" + "---|" * len(grid.columns)]
    previous = None
    for (requirement, test), row in grid.iterrows():
        named = literal(requirement) if requirement != previous else ""
        previous = requirement
        lines.append(f"| {named} | {literal(test)} | " + " | ".join(_cell_text(c) for c in row) + " |")
    for section, svg in shown:
        lines += ["", f"## {section.title}", "", section.text, "", raw_html(svg)]
    return "\n".join([*lines, ""])


def _comparisons(reports: Path) -> str:
    """Links to every comparison page under reports/compare/ (`llmaudit compare`); '' when there is none."""
    pages = comparison_pages(reports)
    if not pages:
        return ""
    items = "\n".join(f'<li><a href="{COMPARE_FOLDER}/{escape(quote(page.name))}">{escape(page_label(page))}</a></li>'
                      for page in pages)
    return f"\n<h2>Model comparisons</h2>\n<p>{sanitise(render_inline(COMPARE))}</p>\n<ul>\n{items}\n</ul>"


def bottom_lines(tables: dict[str, pd.DataFrame]) -> dict[str, BottomLine]:
    """Per model with verdicts, its bottom line (`report.bottom_line`)."""
    said = {model: bottom_line({"config": {"name": model}, "verdicts": table.to_dict("records")})
            for model, table in tables.items()}
    return {model: line for model, line in said.items() if line is not None}


def _bottom_lines(said: dict[str, BottomLine]) -> str:
    """Per model, its bottom line as HTML, with the rules it follows."""
    items = "".join(f"<li>{escape(line.sentence)}</li>" for line in said.values())
    if not items:
        return ""
    return f'<h2 id="bottom-lines">Bottom line per model</h2>\n<ul>{items}</ul>\n<p>{escape(RULES)}</p>\n'


def _html(grid: pd.DataFrame, shown: Shown, comparisons: str = "", skipped: tuple[str, ...] = (),
          lines: str = "") -> str:
    """The index as one self-contained HTML page (same styles as the reports), with each model's bottom line
    (`lines`), links to the comparison pages (`comparisons`, from `_comparisons`), naming the folders left out; a
    requirement's text heads its rows once, and a model that recorded no such test reads "not run"."""
    unrun = [m for m in grid.columns if grid[m].isna().all()]
    head = "".join(f'<th><a href="{escape(quote(m))}/report.html">{escape(m)}</a>'
                   + (f'<span class="unchecked">{NOT_RUN}: no verdict test recorded</span>' if m in unrun else "")
                   + "</th>" for m in grid.columns)
    rows = []
    for requirement, tests in grid.groupby(level="requirement", sort=False) if not grid.empty else []:
        for i, ((_, test), row) in enumerate(tests.iterrows()):
            lead = f'<td class="req" rowspan="{len(tests)}">{escape(requirement)}</td>' if i == 0 else ""
            cells = "".join(f'<td class="none">{NOT_RUN}</td>' if c is None
                            else f"<td>{badge(c[0])}{escape(_unchecked(c))}<br>{_score(c)}</td>" for c in row)
            rows.append(f"<tr>{lead}<td>{escape(test)}</td>{cells}</tr>")
    body = (f'<table class="verdicts"><thead><tr><th>Requirement</th><th>Test</th>{head}</tr></thead><tbody>'
            + "\n".join(rows) + "</tbody></table>") if rows else "<p>No model has been audited yet.</p>"
    left_out = "".join(f'<p class="unchecked">Left out: {escape(reason)}</p>\n' for reason in skipped)
    for section, svg in shown:
        body += f"\n<h2>{escape(section.title)}</h2>\n<p>{escape(section.text)}</p>\n{svg}"
    body += comparisons
    return (f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n<title>Audited models</title>\n'
            f"<style>\n{CSS}\n{FRONT_CSS}\nbody {{ max-width: none; }}\ntd.none {{ color: var(--muted); }}\n"
            f"</style>\n</head>\n<body>\n<h1>Audited models</h1>\n<p>{sanitise(render_inline(INTRO))}</p>\n"
            f"{left_out}{lines}{body}\n</body>\n</html>\n")


def build_index(reports: Path, own: Audited | None = None) -> Path:
    """Write reports/index.md and reports/index.html, leaving out and naming damaged or copied sibling folders (the
    `own` folder's results, the audit just run, as read once; its damaged similarity files stop with their error);
    returns the HTML path."""
    reports = Path(reports)
    tables, damaged = audited(reports, own)
    shown, copied = figures(reports, list(tables), None if own is None else own.folder.name)
    grid, skipped = side_by_side(tables), damaged + copied
    said = bottom_lines(tables)
    write_atomic(reports / "index.md", _markdown(grid, shown, skipped, said))
    page = _html(grid, shown, _comparisons(reports), tuple(skipped), _bottom_lines(said))
    return write_atomic(reports / "index.html", page)
