"""A comparison (`report.comparison`) as one self-contained HTML page: no scripts, no network, every string from
the report folders escaped."""

from __future__ import annotations

from datetime import UTC, datetime
from html import escape
from urllib.parse import quote

import llmaudit
from llmaudit.report.comparison import ALPHA, N_BOOT, SEED, Comparison, more_biased
from llmaudit.report.html import CSS

PAGE_CSS = """
.outcome { display: inline-block; padding: .05rem .5rem; border-radius: 1rem; font-weight: 600; font-size: .8rem; }
.outcome.tied { background: #dafbe1; color: #116329; }
.outcome.a-more-biased, .outcome.b-more-biased { background: #ffebe9; color: #a40e26; }
.outcome.inconclusive { background: #fff8c5; color: #7d4e00; }
""".strip()


def _badge(result: str) -> str:
    return f'<span class="outcome {escape(result.lower().replace(" ", "-"))}">{escape(result)}</span>'


def _ci(value: float, lo: float, hi: float) -> str:
    return f"{value:+.4f} [{lo:+.4f}, {hi:+.4f}]"


def to_html(comparison: Comparison, generated: str | None = None) -> str:
    """The comparison as one self-contained HTML page (no scripts, no network; every string escaped)."""
    c = comparison
    generated = generated or datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    a, b = escape(c.a), escape(c.b)
    link = lambda name: f'<a href="../{escape(quote(name))}/report.html">{escape(name)}</a>'  # noqa: E731
    rows = []
    for r in c.tests.itertuples(index=False):
        who = more_biased(c, r.outcome)
        rows.append(f"<tr><td>{escape(r.test)}</td><td>{escape(r.chapter)}</td><td class=\"num\">{r.n_shared}</td>"
                    f'<td class="num">{_ci(r.score_a, r.score_a_lo, r.score_a_hi)}</td>'
                    f'<td class="num">{_ci(r.score_b, r.score_b_lo, r.score_b_hi)}</td>'
                    f'<td class="num">{_ci(r.d, r.lo, r.hi)}</td>'
                    f"<td>{_badge(r.outcome)}{'<br>' + escape(who) if who else ''}</td></tr>")
    head = (f"<tr><th>Test</th><th>Chapter</th><th>Shared units</th><th>Score A ({a})</th><th>Score B ({b})</th>"
            "<th>D = |A| &minus; |B| [95% CI]</th><th>Outcome</th></tr>")
    table = f'<table class="comparison"><thead>{head}</thead><tbody>\n' + "\n".join(rows) + "\n</tbody></table>"
    missing = "".join(f"<li>{escape(r.test)}: {escape(r.reason)}</li>" for r in c.not_comparable.itertuples())
    missing = f"<h2>Not comparable</h2>\n<ul>{missing}</ul>" if missing else ""
    intro = (f"A = {link(c.a)}, B = {link(c.b)}. For each test both audits ran, D is |mean of A's per-unit values| "
             f"minus |mean of B's| over the units (cases, seeds, profiles) both drew: positive when A's score lies "
             f"further from zero. The interval is a paired percentile bootstrap ({N_BOOT} resamples of the shared "
             f"units, seed {SEED}, {1 - ALPHA:.0%}). Against &epsilon; = {c.epsilon:g} ({escape(c.epsilon_source)}) "
             f"as the audit's verdicts are: <b>tied</b> when the interval lies within [&minus;&epsilon;, &epsilon;], "
             f"<b>A more biased</b> when it lies wholly above &epsilon;, <b>B more biased</b> wholly below "
             f"&minus;&epsilon;, <b>inconclusive</b> otherwise. Scores are the means over the shared units, with "
             f"their intervals from the same resamples.")
    title = f"{c.a} vs {c.b}"
    return (f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">\n<title>{escape(title)}</title>\n'
            f"<style>\n{CSS}\n{PAGE_CSS}\nbody {{ max-width: none; }}\n</style>\n</head>\n<body>\n"
            f'<header><h1>{a} vs {b}</h1><p class="meta">Generated {escape(generated)} by llmaudit '
            f'{escape(llmaudit.__version__)} from the case files of both reports; <a href="../index.html">all audited '
            f"models</a></p></header>\n<p>{intro}</p>\n{table}\n{missing}\n</body>\n</html>\n")
