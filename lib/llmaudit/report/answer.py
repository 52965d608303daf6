"""The report's first screen, the answer: per requirement its verdict (the verdict page's, gates included), the test
that decides it with its interval against epsilon and one plain reason, under one or two lines saying which model
was audited, when, and how far (chapters run, sizes). Built from a results.json document (`results_document`) by
pure functions, so what the reader sees first is what the data files say."""

from __future__ import annotations

from dataclasses import dataclass
from html import escape
from typing import Any

import pandas as pd

from llmaudit.registry import KEYS, chapter
from llmaudit.report.front import badge, p_value
from llmaudit.verdict.margins import shown
from llmaudit.verdict.verdicts import NOT_MEASURABLE, overall

CSS = """
#answer { margin: .75rem 0 1.25rem; }
#answer p.scope { margin: 0 0 .5rem; font-size: .9rem; color: var(--muted); }
table.answer { display: table; width: 100%; margin: 0; font-size: .85rem; line-height: 1.35; }
table.answer th, table.answer td { padding: .3rem .5rem; }
table.answer td.req { width: 26%; font-weight: 600; }
table.answer td.test { width: 28%; }
table.answer .small { display: block; color: var(--muted); font-variant-numeric: tabular-nums; }
""".strip()


@dataclass(frozen=True)
class Answer:
    """One requirement on the first screen: its verdict, the deciding test (label and 'score [lo, hi]', empty when no
    test is measurable) and why, in a line."""

    requirement: str
    verdict: str
    test: str
    interval: str
    reason: str


def _interval(t: Any) -> str:
    return f"{t.score:+.4f} [{t.lo:+.4f}, {t.hi:+.4f}]"


def _against_epsilon(t: Any) -> str:
    """Where a measurable test's interval lies against +-epsilon, which is what decides its verdict: inside passes an
    invariance test and fails a dependence test (main paper §3.4), wholly outside the reverse."""
    eps, ci = t.epsilon, f"95% CI [{t.lo:+.4f}, {t.hi:+.4f}]"
    inside = t.verdict == ("fail" if t.get("kind", "invariance") == "dependence" else "pass")
    if inside:
        return f"{ci} lies inside ±{eps:g}"
    if t.verdict in ("pass", "fail"):
        return f"{ci} lies wholly {'above +' if t.lo > eps else 'below -'}{eps:g}"
    crossed = [f"{sign}{eps:g}" for sign, bound in (("-", -eps), ("+", eps)) if t.lo < bound < t.hi]
    return f"{ci} straddles {' and '.join(crossed) or f'±{eps:g}'}"


def _decider(tests: pd.DataFrame, verdict: str) -> Any:
    """The test that gives a requirement its verdict: the most significant fail, the inconclusive test furthest from
    0, or the pass whose interval comes closest to epsilon."""
    own = tests[tests["verdict"] == verdict]
    if verdict == "fail":
        return own.loc[own["p_holm"].idxmin()] if own["p_holm"].notna().any() else own.iloc[0]
    reach = own[["lo", "hi"]].abs().max(axis=1) if verdict == "pass" else own["score"].abs()
    return own.loc[reach.idxmax()]


def _unmeasurable(tests: pd.DataFrame) -> str:
    """Why no test of a requirement is measurable: the unmet gates every test shares, else the first test's."""
    unmet = [tuple(u) for u in tests["unmet"]]
    shared = [u for u in unmet[0] if all(u in other for other in unmet[1:])]
    return "; ".join(shared or unmet[0])


def answers(document: dict[str, Any]) -> list[Answer]:
    """One Answer per requirement of a results.json document's verdicts, in the verdict page's order."""
    table = pd.DataFrame(document.get("verdicts", []))
    if table.empty:
        return []
    table["p_holm"] = table["p_holm"].astype(float)
    found = []
    for requirement, verdict in overall(table).items():
        tests = table[table["requirement"] == requirement]
        if verdict == NOT_MEASURABLE:
            found.append(Answer(requirement, verdict, f"none of {len(tests)} tests measurable", "",
                                _unmeasurable(tests)))
            continue
        t = _decider(tests, verdict)
        reason = _against_epsilon(t)
        left_out = int((tests["verdict"] == NOT_MEASURABLE).sum())
        if left_out:
            reason += f"; {left_out} of {len(tests)} tests not measurable"
        if verdict == "fail" and t.holm:
            reason += f"; {t.holm} Holm's correction (p_adj {p_value(t.p_holm)})"
        if t.gate == "not checked":
            reason += f"; {'; '.join(t.unmet)}"
        found.append(Answer(requirement, verdict, t.test, _interval(t), reason))
    return found


def _sizes(document: dict[str, Any]) -> str:
    """The units behind the verdict tests' intervals, per kind, e.g. '4-6 cases, 2 demonstration seeds per test'."""
    table = pd.DataFrame(document.get("verdicts", []))
    if table.empty or table["n"].isna().all():
        return ""
    parts = []
    for unit, n in table.dropna(subset=["n"]).groupby("resampled", sort=False)["n"]:
        low, high = int(n.min()), int(n.max())
        parts.append(f"{low if low == high else f'{low}-{high}'} {unit}")
    return ", ".join(parts) + " per test"


def scope(document: dict[str, Any]) -> str:
    """One or two lines: model, date, chapters run (of those the params list) and sizes, epsilon and params file."""
    config = document.get("config", {})
    model = config.get("model", {})
    listed = config.get("listed") or list(KEYS)  # the params' chapters as parsed at the run's start
    ran = [key for key in listed if key in document.get("results", {})]
    missing = [key for key in listed if key not in ran]
    titles = ", ".join(chapter(key).title.lower() if key in KEYS else key for key in ran)
    head = f"Model {config.get('name', '?')} ({model.get('source', 'source not recorded')})"
    when = f", audited {document['date']}" if document.get("date") else ""
    chapters = f"{len(ran)} of {len(listed)} chapters run ({titles})"
    if missing:
        chapters += f"; not run: {', '.join(missing)}"
    sizes = _sizes(document)
    epsilon = config.get("epsilon")
    params = f"params {config.get('file', '?')}, ε: {'?' if epsilon is None else shown(epsilon)}"
    return f"{head}{when}. Scope: {chapters}; {sizes + '; ' if sizes else ''}{params}."


def answer_section(document: dict[str, Any]) -> str:
    """The first screen: the scope line and the table of answers; '' where the document holds no verdict."""
    rows = answers(document)
    if not rows:
        return ""
    body = "\n".join(
        f'<tr><td class="req">{escape(a.requirement)}</td><td>{badge(a.verdict)}</td>'
        f'<td class="test">{escape(a.test)}<span class="small">{escape(a.interval)}</span></td>'
        f"<td>{escape(a.reason)}</td></tr>"
        for a in rows
    )
    head = "<tr><th>Requirement</th><th>Verdict</th><th>Deciding test, score [95% CI]</th><th>Why</th></tr>"
    return (f'<section id="answer"><p class="scope">{escape(scope(document))} Every test, its gates and power: '
            f'<a href="#verdicts">Verdicts</a>.</p>\n'
            f'<table class="answer"><thead>{head}</thead><tbody>\n{body}\n</tbody></table></section>')
