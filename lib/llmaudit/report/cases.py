""""Cases behind the gaps": for each test the verdict page finds failed or inconclusive, the cases whose two sides
differ most, with the metric named in the column heads, the model's answer mass, and the two prompts with the words
in which they differ marked. Passed and not measurable tests leave theirs in cases/<chapter>.jsonl."""

from __future__ import annotations

from html import escape
from typing import Any

import pandas as pd

from llmaudit.errors import AuditError
from llmaudit.registry import verdict_tests
from llmaudit.report.anchors import cases_id
from llmaudit.report.audited import Audited
from llmaudit.report.evidence import FOLDER, largest_differences, unit_values
from llmaudit.report.front import badge
from llmaudit.report.worddiff import shown, word_diff

CSS = """
table.cases { display: table; width: 100%; }
table.cases pre.prompt { white-space: pre-wrap; overflow-wrap: anywhere; font-size: .8rem; margin: .25rem 0 .5rem; }
table.cases details summary { cursor: pointer; color: var(--muted); font-size: .85rem; }
table.cases .side { font-size: .8rem; color: var(--muted); }
table.cases mark { background: #fff1a8; padding: 0 .1em; }
table.cases td.differs { width: 40%; }
p.cases-error { color: #b42318; }
""".strip()
SHOWN = 3  # cases per test in the report; cases/<chapter>.jsonl has them all
DECIDED = ("fail", "inconclusive")  # the verdicts whose cases the report shows
CHANGES_SHOWN = 3  # differing words listed outside the fold, per case


def _prompt(label: str, html: str | None, n: int) -> str:
    first = f" (first of {n} prompts)" if n > 1 else ""
    return (f'<div class="side">{escape(label)}{escape(first)}</div>'
            f'<pre class="prompt">{html if html is not None else "(not recorded)"}</pre>')


def _differs(row: Any) -> str:
    """What separates the two sides of a case: the words that differ (the prompts folded under them, marked), or,
    for a sweep, that both sides read one prompt."""
    a, b = (p if isinstance(p, str) else None for p in (row.prompt_a, row.prompt_b))
    if a == b:
        body = _prompt(f"{row.side_a} and {row.side_b}: the same prompt", shown(a) if a else None,
                       max(row.n_a, row.n_b))
        return f"the same prompt, steered<details><summary>prompt</summary>{body}</details>"
    changes: list[tuple[str, str]]
    if a is None or b is None:
        shown_a, shown_b, changes = (shown(a) if a else None), (shown(b) if b else None), []
    else:
        shown_a, shown_b, changes = word_diff(a, b)
    words = "; ".join(f"<mark>{escape(x) or '(nothing)'}</mark> &rarr; <mark>{escape(y) or '(nothing)'}</mark>"
                      for x, y in changes[:CHANGES_SHOWN])
    more = f" and {len(changes) - CHANGES_SHOWN} more" if len(changes) > CHANGES_SHOWN else ""
    body = _prompt(row.side_a, shown_a, row.n_a) + _prompt(row.side_b, shown_b, row.n_b)
    return f"{words or 'prompts not recorded'}{more}<details><summary>both prompts</summary>{body}</details>"


def _table(cases: pd.DataFrame, test: Any, metric: str) -> str:
    """One decided test's largest paired differences, or '' where its records pair no two sides."""
    top = largest_differences(cases, test.name, SHOWN)
    if top.empty or top["side_a"].isna().all():
        return ""
    first, records = top.iloc[0], cases[cases["test"] == test.name]
    sweep = bool(records["lam"].notna().all())
    values = unit_values(records)["value"]
    side_a, side_b = escape(str(first.side_a)), escape(str(first.side_b))
    meta = (f"{badge(test.verdict)} <code>{escape(test.name)}</code>, "
            f"{escape(records['chapter'].iloc[0])} chapter; score {values.mean():+.4f} = mean of the per-case "
            f"{'slopes' if sweep else 'differences'} over {len(values)} cases")
    head = (f"<tr><th>Case</th><th>{escape(metric)}, {side_a}</th><th>{escape(metric)}, {side_b}</th>"
            f"<th>Difference</th>" + ("<th>Slope per unit &lambda;</th>" if sweep else "")
            + f"<th>Answer mass, {side_a} / {side_b}</th><th>What differs</th></tr>")
    rows = []
    for row in top.itertuples(index=False):
        slope = f'<td class="num">{row.value:+.4f}</td>' if sweep else ""
        rows.append(f'<tr><td>{escape(row.unit)}</td><td class="num">{row.metric_a:.4f}</td>'
                    f'<td class="num">{row.metric_b:.4f}</td><td class="num">{row.diff:+.4f}</td>{slope}'
                    f'<td class="num">{row.mass_a:.3f} / {row.mass_b:.3f}</td>'
                    f'<td class="differs">{_differs(row)}</td></tr>')
    return (f'<h3 id="{cases_id(test.name)}">{escape(test.requirement)} &mdash; {escape(test.test)}</h3>\n'
            f'<p class="meta">{meta}</p>\n'
            f'<table class="cases"><thead>{head}</thead>'
            "<tbody>\n" + "\n".join(rows) + "\n</tbody></table>")


def _browse(pages: dict[str, str]) -> str:
    """A paragraph linking each chapter's page of every case (`report.case_pages`); '' without any."""
    links = [f'<a href="{escape(path)}">{escape(chapter)}</a>' if path.endswith(".html")
             else f"{escape(chapter)} ({escape(path)})" for chapter, path in pages.items()]
    return (f'<p class="browse">Every case of every test, passed and not measurable ones too, a page per test '
            f"listed per chapter (no scripts, readable offline): {', '.join(links)}.</p>\n") if links else ""


def _section(body: str) -> str:
    """The section around its body; '' for an empty one."""
    return f'<section id="cases"><h2>Cases behind the gaps</h2>\n{body}</section>' if body else ""


def cases_section(audited: Audited, pages: dict[str, str] | None = None) -> str:
    """The section for the tests of the audit's verdicts that fail or are inconclusive and have case records in
    reports/<model>/cases/*.jsonl, opening with links to the pages of every case (`pages`, chapter -> path or why
    it is missing); '' where there is neither. A damaged case file is named in the section instead of stopping the
    report."""
    verdicts = audited.verdicts
    decided = verdicts[verdicts["verdict"].isin(DECIDED)] if not verdicts.empty else verdicts
    browse = _browse(pages or {})
    if decided.empty or not audited.cases:
        return _section(browse)
    metrics = {t.name: t.metric for t in verdict_tests()}
    parts = []
    for name, cases in audited.cases.items():
        try:
            if isinstance(cases, AuditError):  # the file could not be read
                raise cases
            recorded = set(cases["test"])
            parts += [_table(cases, t, metrics.get(t.name, "metric"))
                      for t in decided.itertuples(index=False) if t.name in recorded]
        except AuditError as err:
            parts.append(f'<p class="cases-error">{escape(FOLDER)}/{escape(name)} not shown: '
                         f"{escape(str(err))}</p>")
    parts = [part for part in parts if part]
    if not parts:
        return _section(browse)
    intro = (f"The tests the verdict page finds failed or inconclusive ({len(decided)} of {len(verdicts)}); passed "
             f"and not measurable tests are left out. Each test's score is the mean over cases of a per-case value: "
             f"the difference of the metric between the two groups' prompts (black-box) or the slope of the metric "
             f"on lambda (white-box). Per test, the {SHOWN} cases whose two sides differ most (for a slope, the "
             f"metric at the largest minus the smallest lambda of the grid), the answer mass (the probability the "
             f"model put on the answer words at all) and the words in which the two prompts differ, marked in the "
             f"prompts the model read; every case is in <code>{escape(FOLDER)}/&lt;chapter&gt;.jsonl</code>.")
    return _section(browse + f"<p>{intro}</p>\n" + "\n".join(parts) + "\n")
