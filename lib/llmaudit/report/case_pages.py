"""Every case of every test, browsable offline: per chapter a static page listing its tests (cases/<chapter>.html,
beside cases/<chapter>.jsonl) and per test a page (cases/<chapter>/<test>.html), no scripts, with the test's
verdict and one row per record: the case, its side (group, or lambda for a sweep), the metric, the per-case value
whose mean is the score, the answer mass and the prompt the model read, folded. A page per test, not per chapter:
a paper-size audit's decision-tasks records are 144 MB, which no browser opens as one page. The report's "Cases
behind the gaps" shows the few cases that differ most per failed test; these pages hold them all, as HELM's
instance browser does."""

from __future__ import annotations

from dataclasses import dataclass, field
from html import escape
from pathlib import Path
from typing import Any

import pandas as pd

from llmaudit.atomic import write_atomic
from llmaudit.errors import AuditError
from llmaudit.footnotes import Marks
from llmaudit.formats import missing
from llmaudit.report.anchors import slug
from llmaudit.report.audited import Audited
from llmaudit.report.evidence import FOLDER
from llmaudit.report.front import badge

PAGE_CSS = """
table.records { width: 100%; font-size: .85rem; }
table.records pre { white-space: pre-wrap; overflow-wrap: anywhere; font-size: .8rem; margin: .25rem 0; }
table.records details summary { cursor: pointer; color: var(--muted); }
nav.tests { font-size: .9rem; }
@media print { details::details-content { content-visibility: visible; display: block; } }
@media (max-width: 640px) { table.records { display: block; overflow-x: auto; } }
""".strip()


def page_path(chapter: str) -> str:
    """A chapter's case page, relative to the report folder."""
    return f"{FOLDER}/{chapter}.html"


def case_page(chapter: str, test: str) -> str:
    """A test's case page, relative to the report folder."""
    return f"{FOLDER}/{chapter}/{slug(test)}.html"


# Why a record's field is empty, per field (a record's fields: `llmaudit.records`)
WHY = {"metric": "the chapter read no metric for this record (e.g. a sampled answer that named no answer word)",
       "value": "the record's case is outside the test's score (e.g. a question without a bias target)",
       "mass": "no answer mass was read for this record (a sampled answer, not a probability read)",
       "side": "the record belongs to neither a group nor a steering coefficient"}


def _number(value: Any, field: str, marks: Marks, digits: str = ".4f") -> str:
    """A record's number, or the em dash with the mark of why the field is empty."""
    return marks.missing(WHY[field]) if missing(value) else format(float(value), digits)


def _side(record: Any, marks: Marks) -> str:
    """Which side of the case a record is: its group, its lambda, or both."""
    parts = [] if missing(record.group) else [escape(str(record.group))]
    parts += [] if missing(record.lam) else [f"λ = {float(record.lam):+g}"]
    return ", ".join(parts) or marks.missing(WHY["side"])


def _rows(records: pd.DataFrame, marks: Marks) -> str:
    """One table row per record, in case order; a prompt shown once per case (a sweep reads one prompt at every
    lambda: repeating it made a paper-size test's page several times larger)."""
    rows, seen = [], set()
    for r in records.itertuples(index=False):
        key = (r.unit, r.prompt_sha if isinstance(r.prompt_sha, str) else r.prompt)
        if not isinstance(r.prompt, str):
            prompt = "(not recorded)"
        elif key in seen:
            prompt = "the case's prompt above"
        else:
            seen.add(key)
            prompt = escape(r.prompt)
        rows.append(f"<tr><td>{escape(str(r.unit))}</td><td>{_side(r, marks)}</td>"
                    f'<td class="num">{_number(r.metric, "metric", marks)}</td>'
                    f'<td class="num">{_number(r.value, "value", marks, "+.4f")}</td>'
                    f'<td class="num">{_number(r.mass, "mass", marks, ".3f")}</td>'
                    f"<td><details><summary>prompt</summary><pre>{prompt}</pre></details></td></tr>")
    return "\n".join(rows)


def _html(title: str, style: str, up: str, body: str) -> str:
    """A page of the report's style, linking back up (`up`: the relative path of the page above)."""
    return ('<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
            '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
            f"<title>{escape(title)}</title>\n<style>\n{style}\n{PAGE_CSS}\n</style>\n</head>\n<body>\n"
            f'<p><a href="{escape(up)}">&larr; back</a></p>\n{body}\n</body>\n</html>\n')


def _test_page(chapter: str, test: str, records: pd.DataFrame, verdict: str | None, style: str, title: str) -> str:
    units, marks = records["unit"].nunique(), Marks()
    rows = _rows(records, marks)
    said = f"{badge(verdict)} " if verdict else ""
    body = (f"<h1>{said}<code>{escape(test)}</code></h1>\n"
            f'<p class="meta">{escape(chapter)} chapter; {units} case{"s" * (units != 1)}, {len(records)} records. '
            f"{LEGEND}</p>\n"
            '<table class="records"><thead><tr><th>Case</th><th>Side</th><th>Metric</th>'
            "<th>Per-case value</th><th>Answer mass</th><th>Prompt</th></tr></thead><tbody>\n"
            f"{rows}\n</tbody></table>{marks.html()}")
    return _html(f"{title}: cases of {test}", style, f"../{chapter}.html", body)


def _chapter_page(chapter: str, tests: dict[str, pd.DataFrame], verdicts: dict[str, str], style: str,
                  title: str) -> str:
    items = "".join(f'<li>{badge(verdicts[t]) + " " if t in verdicts else ""}'
                    f'<a href="{escape(chapter)}/{escape(slug(t))}.html">{escape(t)}</a> '
                    f'({records["unit"].nunique()} cases)</li>' for t, records in tests.items())
    body = (f"<h1>Cases of the {escape(chapter)} chapter</h1>\n<p>Every test of this chapter with its case records "
            f"(<code>{escape(chapter)}.jsonl</code>), a page per test. {LEGEND}</p>\n"
            f'<nav class="tests"><ol>{items}</ol></nav>')
    return _html(f"{title}: cases of {chapter}", style, "../report.html#cases", body)


LEGEND = ("A record gives the case, its side (the group whose prompt it is, or the steering coefficient λ of a "
          "sweep), the metric the model's answer gave, the per-case value whose mean over cases is the test's score "
          "(a difference between groups, or a slope on λ), the answer mass (the probability the model put on the "
          "answer words at all) and the prompt the model read.")


@dataclass(frozen=True)
class CasePages:
    """The pages written, relative to the report: per chapter its page or why none was written (a damaged case
    file), per test its page."""

    chapters: dict[str, str] = field(default_factory=dict)
    tests: dict[str, str] = field(default_factory=dict)


def write_case_pages(audited: Audited, style: str, title: str) -> CasePages:
    """Write cases/<chapter>.html and cases/<chapter>/<test>.html for each readable case file (`style`: the
    report's CSS)."""
    verdicts = dict(zip(audited.verdicts.get("name", []), audited.verdicts.get("verdict", []), strict=True))
    written = CasePages()
    for name, records in audited.cases.items():
        chapter = Path(name).stem
        if isinstance(records, AuditError):
            written.chapters[chapter] = f"not written: {records}"
            continue
        tests = {str(t): part for t, part in records.groupby("test", sort=False)}
        for test, part in tests.items():
            page = _test_page(chapter, test, part, verdicts.get(test), style, title)
            written.tests[test] = str(write_atomic(audited.folder / case_page(chapter, test), page)
                                      .relative_to(audited.folder).as_posix())
        write_atomic(audited.folder / page_path(chapter), _chapter_page(chapter, tests, verdicts, style, title))
        written.chapters[chapter] = page_path(chapter)
    return written
