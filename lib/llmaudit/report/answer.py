"""The report's first screen, the answer: the bottom line (a generated sentence and tally, `report.bottom_line`), then
per requirement its verdict (the verdict page's, gates included), each of its tests as a badge linked to its row of
the verdict page (so instruments that differ show side by side), and the test that decides it with its interval
against epsilon and one plain reason, under one or two lines saying which model was audited, when, and how far
(chapters run, sizes). Built from a results.json document (`results_document`) by pure functions, so what the reader
sees first is what the data files say."""

from __future__ import annotations

from dataclasses import dataclass
from html import escape
from typing import Any

import pandas as pd

from llmaudit.formats import estimate, interval
from llmaudit.registry import KEYS, chapter
from llmaudit.report.anchors import requirement_id, test_id
from llmaudit.report.bottom_line import RULES, bottom_line
from llmaudit.report.effects import explained
from llmaudit.report.front import badge, p_value
from llmaudit.report.limits import limits, plain, shared_unmet
from llmaudit.verdict.margins import shown
from llmaudit.verdict.verdicts import NOT_MEASURABLE, overall

CSS = """
#answer { margin: .75rem 0 1.25rem; }
#answer p.scope { margin: 0 0 .5rem; font-size: .9rem; color: var(--muted); }
table.answer { display: table; width: 100%; margin: 0; font-size: .85rem; line-height: 1.35; }
table.answer th, table.answer td { padding: .3rem .5rem; }
table.answer { table-layout: fixed; }
table.answer th:nth-child(1) { width: 18%; }
table.answer th:nth-child(2) { width: 10.5em; }
table.answer th:nth-child(3) { width: 26%; }
table.answer td.req { font-weight: 600; overflow-wrap: anywhere; }
table.answer td.test p { margin: 0 0 .3rem; }
table.answer .small { display: block; color: var(--muted); font-variant-numeric: tabular-nums; }
#answer p.bottom-line { font-size: 1.05rem; margin: 0 0 .5rem; max-width: 60rem; }
ul.tests { list-style: none; margin: 0; padding: 0; display: flex; flex-wrap: wrap; gap: .25rem .75rem; }
ul.tests li { font-size: .8rem; }  /* a long label wraps within its fixed-width column */
ul.tests a { color: inherit; text-decoration: none; }
#answer div.limits { max-width: 60rem; font-size: .9rem; }
#answer div.limits h3 { font-size: 1rem; margin: .5rem 0 .25rem; }
#answer div.limits ul { margin: 0 0 .75rem; padding-left: 1.25rem; }
ul.tests .verdict { min-width: 0; font-size: .7rem; margin-right: .25rem; }
""".strip()


@dataclass(frozen=True)
class Answer:
    """One requirement on the first screen: its verdict, the deciding test (label and 'score [lo, hi]', empty when no
    test is measurable), why, in a line, and what it means: sentences in the decision's own units and direction
    (`report.effects`)."""

    requirement: str
    verdict: str
    test: str
    interval: str
    reason: str
    meaning: tuple[str, ...] = ()


def _against_epsilon(t: Any) -> str:
    """Where a measurable test's interval lies against +-epsilon, which is what decides its verdict: inside passes an
    invariance test and fails a dependence test (main paper §3.4), wholly outside the reverse."""
    eps, ci = t.epsilon, f"95% CI {interval(t.lo, t.hi)}"
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
            why = "; ".join(shared_unmet(tests))
            plainly = "; ".join(plain(u) for u in shared_unmet(tests))
            found.append(Answer(requirement, verdict, f"none of {len(tests)} tests measurable", "", why,
                                (f"Cannot be assessed: {plainly}.",)))
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
        rows = [dict(r) for _, r in tests.iterrows()]
        found.append(Answer(requirement, verdict, t.test, estimate(t.score, t.lo, t.hi), reason,
                            tuple(explained(document, rows, str(t["name"])))))
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


def short_label(label: str) -> str:
    """A test's label as its badge names it: 'black-box gap, race stated' -> 'stated', 'white-box slope, steering
    race_dial' -> 'white-box race_dial', 'black-box gap, race implied (names or dialect)' -> 'implied'."""
    for prefix, shown_as in (("black-box gap, ", ""), ("white-box slope, steering ", "white-box "),
                             ("black-box dependence, ", "black-box: "), ("white-box dependence, ", "white-box: ")):
        if label.startswith(prefix):
            rest = label.removeprefix(prefix)
            return shown_as + (rest.split(" ")[1] if not shown_as and " " in rest else rest)
    return label


def _tests(tests: pd.DataFrame) -> str:
    """A requirement's tests as a row of badges, each linked to its row of the verdict page."""
    items = "".join(f'<li><a href="#{test_id(t.name)}" title="{escape(t.test)}">{badge(t.verdict)}'
                    f"{escape(short_label(t.test))}</a></li>" for t in tests.itertuples(index=False))
    return f'<ul class="tests">{items}</ul>'


def answer_section(document: dict[str, Any], summary: str | None = None) -> str:
    """The first screen: the scope line, the bottom line and the table of answers with each requirement's tests,
    linking the printable summary (`summary`, its path beside the report, where written); '' where the document
    holds no verdict."""
    rows = answers(document)
    line = bottom_line(document)
    if not rows or line is None:
        return ""
    table = pd.DataFrame(document["verdicts"])
    body = "\n".join(
        f'<tr><td class="req"><a href="#{requirement_id(a.requirement)}">{escape(a.requirement)}</a></td>'
        f"<td>{badge(a.verdict)}</td><td>{_tests(table[table['requirement'] == a.requirement])}</td>"
        f'<td class="test">{"".join(f"<p>{escape(line)}</p>" for line in a.meaning)}'
        f'<span class="small">{escape(a.test)}{f": {escape(a.interval)}; {escape(a.reason)}" if a.interval else ""}'
        "</span></td></tr>"
        for a in rows
    )
    head = ("<tr><th>Requirement</th><th>Verdict</th><th>Its tests</th><th>What it means (deciding test, score "
            "[95% CI], why)</th></tr>")
    return (f'<section id="answer"><p class="bottom-line"><strong>{escape(line.sentence)}</strong></p>\n'
            f'<p class="scope">{escape(scope(document))} Every test, its gates and power: '
            f'<a href="#verdicts">Verdicts</a>; the terms used here: <a href="#glossary">Glossary</a>'
            + (f'; a summary of two printed pages to sign: <a href="{escape(summary)}">summary</a>' if summary else "")
            + ".</p>\n"
            f'<details class="method"><summary>How the bottom line is generated</summary><p>{escape(RULES)}</p>'
            "</details>\n"
            '<div class="limits"><h3>What this means and its limits</h3><ul>'
            + "".join(f"<li>{escape(line)}</li>" for line in limits(document)) + "</ul></div>\n"
            f'<table class="answer"><thead>{head}</thead><tbody>\n{body}\n</tbody></table></section>')
