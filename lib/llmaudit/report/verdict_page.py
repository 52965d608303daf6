"""The verdict page: per requirement a block with its overall verdict, the instrument gates its tests share (stated
once, folded), and a compact results table in lm-evaluation-harness's shape (test | metric | n | value | interval |
verdict), each test row with an id the first screen links to and links to its evidence (its chapter's table and
figure, its cases); what an inconclusive test would need and whether a fail survives Holm's correction sit under its
verdict."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

import pandas as pd

from llmaudit.footnotes import Marks
from llmaudit.formats import count, interval, missing, signed
from llmaudit.registry import verdict_tests
from llmaudit.report.anchors import requirement_id, test_id
from llmaudit.report.front import OUTCOMES, badge, p_value
from llmaudit.verdict.gates import NOT_CHECKED
from llmaudit.verdict.verdicts import ALPHA, NOT_MEASURABLE, overall

CSS = """
section.requirement h3 .verdict { margin-right: .5rem; vertical-align: .1em; }
section.requirement details.gates { font-size: .85rem; color: var(--muted); margin: .25rem 0; }
section.requirement details.gates summary { cursor: pointer; }
section.requirement details.gates ul { margin: .25rem 0; }
table.results { display: table; width: 100%; margin: .5rem 0 1rem; }
table.results td.num { white-space: nowrap; text-align: right; }
table.results .small { display: block; font-size: .75rem; color: var(--muted); white-space: normal; }
table.results td.evidence a { display: block; white-space: nowrap; font-size: .85rem; }
details.method { margin: .5rem 0 1rem; max-width: 60rem; }
details.method > summary { cursor: pointer; color: var(--muted); }
""".strip()
Links = Mapping[str, Sequence[tuple[str, str]]]  # per test name: (text, href) of its evidence
NO_N = "its chapter recorded no n (a results file written before n was kept): rerun it"


def _power(t: Any) -> str:
    """The half-width against epsilon, with n, and for an inconclusive test the units (cases, profiles, seeds)
    that would decide it."""
    n = "n not recorded" if pd.isna(t.n) else f"n = {t.n}"
    text = f"&plusmn;{t.half_width:.4f} vs &epsilon; = {t.epsilon:g} ({n})"
    if t.verdict != "inconclusive" or pd.isna(t.n):
        return text
    unit = escape(t.resampled)
    needed = (f"no number of {unit} decides it (|S| at or within rounding of &epsilon;)" if math.isinf(t.cases_needed)
              else f"inconclusive: about {int(t.cases_needed)} {unit} needed")
    return f"{text}<br>{needed}"


def _outcome(t: Any) -> str:
    """The test's badge, flagged where a gate could not be checked, with Holm's reading of a fail under it."""
    flag = '<span class="unchecked">gate not checked</span>' if t.gate == NOT_CHECKED else ""
    holm = (f'<span class="small">Holm: {escape(t.holm)} (p<sub>adj</sub> {escape(p_value(t.p_holm))})</span>'
            if t.holm else "")
    return badge(t.verdict) + flag + holm


def _gates(texts: Sequence[str], summary: str) -> str:
    """Gate texts folded under a summary that says how many there are and whether any is unmet."""
    if not texts:
        return ""
    unmet = sum(": " in text for text in texts)
    state = f"{unmet} not met or not checked" if unmet else "all met"
    items = "".join(f"<li>{escape(text)}</li>" for text in texts)
    return f'<details class="gates"><summary>{summary} ({len(texts)}: {state})</summary><ul>{items}</ul></details>'


def _numbers(t: Any, marks: Marks) -> tuple[str, str, str]:
    """A test's n, value and interval as printed, each missing one as the em dash with its reason's mark (a test
    without a score: its chapter's note; a score without n: a results file from before n was recorded)."""
    if missing(t.score):
        why = marks.missing(str(t.unmet[-1]).removeprefix(f"{t.name}: "))
        return (why if missing(t.n) else count(t.n)), why, why
    return (marks.missing(NO_N) if missing(t.n) else count(t.n)), signed(t.score), interval(t.lo, t.hi)


def _row(t: Any, shared: set[str], metrics: Mapping[str, str], links: Links, marks: Marks) -> str:
    """One test's row: label (its own gates folded), metric and unit, n, value, interval, verdict, evidence."""
    own = _gates([g for g in t.gates if g not in shared], "its own gates")
    n, value, bounds = _numbers(t, marks)
    evidence = "".join(f'<a href="{escape(href)}">{escape(text)}</a>' for text, href in links.get(t.name, ()))
    metric = escape(metrics.get(t.name, t.epsilon_unit))
    return (f'<tr id="{test_id(t.name)}"><td>{escape(t.test)}<span class="small">resampled: {escape(t.resampled)}'
            f"</span>{own}</td><td>{metric}<span class=\"small\">{escape(t.epsilon_unit)}, &epsilon; = {t.epsilon:g}"
            f'</span></td><td class="num">{n}</td><td class="num">{value}</td>'
            f'<td class="num">{bounds}<span class="small">{_power(t)}</span></td>'
            f'<td>{_outcome(t)}</td><td class="evidence">{evidence}</td></tr>')


def _requirement(requirement: str, verdict: str, tests: pd.DataFrame, links: Links) -> str:
    """One requirement's block: heading with its verdict, shared gates once, its results table."""
    gate_lists = [tuple(g) for g in tests["gates"]]
    shared = [g for g in gate_lists[0] if all(g in other for other in gate_lists[1:])] if len(tests) > 1 else []
    metrics = {t.name: t.metric for t in verdict_tests()}
    marks = Marks()
    rows = "\n".join(_row(t, set(shared), metrics, links, marks) for t in tests.itertuples(index=False))
    head = ("<tr><th>Test</th><th>Metric</th><th>n</th><th>Value</th><th>95% CI, half-width</th><th>Verdict</th>"
            "<th>Evidence</th></tr>")
    anchor = requirement_id(requirement)
    return (f'<section class="requirement" id="{anchor}"><h3>{badge(verdict)}{escape(requirement)}</h3>\n'
            + _gates(shared, "Instrument gates shared by its tests")
            + f'\n<table class="results" id="{anchor}-tests"><thead>{head}</thead><tbody>\n{rows}\n</tbody></table>'
            + marks.html() + "</section>")


def method(table: pd.DataFrame) -> str:
    """How a verdict is read: margins, equivalence, dependence, gates, power and Holm's family, folded."""
    margins = "; ".join(f"{epsilon:g} {escape(unit)}" for epsilon, unit
                        in table[["epsilon", "epsilon_unit"]].drop_duplicates().itertuples(index=False))
    family = int((table["verdict"] != NOT_MEASURABLE).sum())
    return (
        '<details class="method"><summary>How a verdict is read</summary>\n'
        "<p>A requirement is invariance of a decision "
        f"to a protected attribute: every score must satisfy |S| &le; &epsilon;, the margin of its unit "
        f"(&epsilon; = {margins}). A test passes when its whole 95% interval lies inside "
        "[&minus;&epsilon;, &epsilon;], fails when it lies wholly outside, and is inconclusive when it straddles "
        "a bound; a requirement takes its worst measurable test. A pass is an equivalence claim: the 95% interval "
        "inside &plusmn;&epsilon;, i.e. two one-sided tests at 2.5% each. A dependence requirement (main paper "
        "&sect;3.4: the decision should move with a task-relevant variable) reads its tests the other way: a pass "
        "lies wholly outside &plusmn;&epsilon;, a fail inside; a white-box invariance test is measurable only where "
        "its task's white-box dependence test passes (the steering instrument moves the decision), and dependence "
        "tests stay out of Holm's family.</p>\n"
        "<p>Each test's instruments are checked first (the params' <code>gates</code>): a test whose steering "
        "vector does not track or move its concept, whose task the model does no better than chance, or whose "
        "sentiment classifier is no better than guessing or never uses a label of its gold answers is <em>not "
        "measurable</em> and never passes; a requirement is not measurable only when all its tests are. A gate "
        "whose number the chapters did not record is shown as not checked. The bootstrap resampled the unit "
        "named per test; the half-width h of an interval shrinks as 1/&radic;n, so an inconclusive test gives "
        "about how many such units would decide it at the observed variance.</p>\n"
        f"<p>This page holds {len(table)} tests, {family} of them measurable: that is the family over which Holm's "
        f"correction at {ALPHA:.0%} runs (p-value of a fail from its interval by a normal approximation); under each "
        "fail, the Verdict column says whether it survives. The per-test verdicts are uncorrected.</p>\n</details>"
    )


def verdict_section(table: pd.DataFrame, links: Links | None = None) -> str:
    """The verdict page: the tally of requirement verdicts, how to read them (folded), then one block per
    requirement; `links`: per test name its evidence links (`report.evidence_links`)."""
    if table.empty:
        return ""
    worst = overall(table)
    counts = worst.value_counts()
    tally = ", ".join(f"{counts[v]} {v}" for v in OUTCOMES if v in counts)
    blocks = [_requirement(str(requirement), worst[requirement], tests, links or {})
              for requirement, tests in table.groupby("requirement", sort=False)]
    return (f'<section id="verdicts"><h2>Verdicts</h2>\n<p><strong>{len(worst)} requirements: {tally}.</strong> '
            "Each requirement below states the instrument gates its tests share once (folded), then its tests, each "
            "linked to its evidence."
            f"</p>\n{method(table)}\n" + "\n".join(blocks) + "\n</section>")
