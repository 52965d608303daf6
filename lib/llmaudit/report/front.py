"""The front of a model's report, before the chapters: the verdict page (per requirement and test, the score,
its interval, epsilon and pass / fail / inconclusive) and the model card that makes the report reproducible."""

from __future__ import annotations

from html import escape
from typing import Any

import pandas as pd

from llmaudit.report.verdicts import overall

CSS = """
.verdict { display: inline-block; min-width: 6.5em; padding: .05rem .5rem; border-radius: 1rem; font-weight: 600;
           font-size: .8rem; text-align: center; }
.verdict.pass { background: #dafbe1; color: #116329; }
.verdict.fail { background: #ffebe9; color: #a40e26; }
.verdict.inconclusive { background: #fff8c5; color: #7d4e00; }
table.verdicts td.req { font-weight: 600; }
table.verdicts td.num { white-space: nowrap; }
dl.card { display: grid; grid-template-columns: max-content 1fr; gap: .3rem 1rem; font-size: .9rem; }
dl.card dt { color: var(--muted); }
dl.card dd { margin: 0; overflow-wrap: anywhere; }
""".strip()


def badge(verdict: str) -> str:
    """A verdict as a coloured label."""
    return f'<span class="verdict {escape(verdict)}">{escape(verdict)}</span>'


def _signed(x: float) -> str:
    return f"{x:+.4f}"


def verdict_section(table: pd.DataFrame) -> str:
    """The verdict page: a count of requirement verdicts, then one row per test grouped by requirement."""
    if table.empty:
        return ""
    worst = overall(table)
    counts = worst.value_counts()
    tally = ", ".join(f"{counts[v]} {v}" for v in ("fail", "inconclusive", "pass") if v in counts)
    rows = []
    for requirement, tests in table.groupby("requirement", sort=False):
        span = len(tests)
        for i, t in enumerate(tests.itertuples(index=False)):
            lead = (f'<td class="req" rowspan="{span}">{escape(requirement)}</td>'
                    f'<td rowspan="{span}">{badge(worst[requirement])}</td>') if i == 0 else ""
            rows.append(f"<tr>{lead}<td>{escape(t.test)}</td><td class=\"num\">{_signed(t.score)}</td>"
                        f"<td class=\"num\">[{_signed(t.lo)}, {_signed(t.hi)}]</td><td>{badge(t.verdict)}</td></tr>")
    epsilon = table["epsilon"].iloc[0]
    head = ("<tr><th>Requirement</th><th>Overall</th><th>Test</th><th>Score</th><th>95% CI</th>"
            "<th>Verdict</th></tr>")
    return (
        '<section id="verdicts"><h2>Verdicts</h2>\n'
        f"<p><strong>{len(worst)} requirements: {tally}.</strong> A requirement is invariance of a decision "
        f"to a protected attribute: every score must satisfy |S| &le; &epsilon; = {epsilon:g} (metric units; "
        "per unit of &lambda; for white-box slopes). A test passes when its whole 95% interval lies inside "
        "[&minus;&epsilon;, &epsilon;], fails when it lies wholly outside, and is inconclusive when it straddles "
        "a bound; a requirement takes its worst test.</p>\n"
        f'<table class="verdicts"><thead>{head}</thead><tbody>\n' + "\n".join(rows) + "\n</tbody></table></section>"
    )


def _row(label: str, value: Any) -> str:
    return f"<dt>{escape(label)}</dt><dd>{value}</dd>"


def card_section(card: dict[str, Any]) -> str:
    """The model card: model and weights hash, params, code and library versions, data hashes, wall times."""
    if not card:
        return ""
    model, params, env, data = card.get("model", {}), card["params"], card["environment"], card["data"]
    walls = card.get("wall_seconds", {})
    total = sum(walls.values())
    libraries = ", ".join(f"{name} {v}" for name, v in env["libraries"].items())
    files = "\n".join(f"{sha}  {key}" for key, sha in data["files"].items())
    items = [
        _row("Model", escape(f"{params['name']} from {model.get('source', 'unknown')}")),
        _row("Weights sha256", f"<code>{escape(str(model.get('sha256') or 'n/a (pinned by hub revision)'))}</code>"),
        _row("Hub revision", f"<code>{escape(str(model['revision']))}</code>") if model.get("revision") else "",
        _row("Dtype, device", escape(f"{model.get('dtype', '?')}, {model.get('device', '?')}; "
                                     f"{model.get('blocks', '?')} blocks of width {model.get('width', '?')}")),
        _row("Params", f"<code>params/{escape(params['file'])}</code> sha256 <code>{escape(params['sha256'][:16])}</code>"
                       f"; seed {params['seed']}, &epsilon; = {params['epsilon']:g}"),
        _row("Code", escape(f"llmaudit {env['llmaudit']}, computing code {env['code_version']}, "
                            f"git {env['git_commit'] or 'n/a'}")),
        _row("Python", escape(f"{env['python']} on {env['platform']}")),
        _row("Libraries", escape(libraries)),
        _row("Data", f"manifest sha256 <code>{escape(data['manifest_sha256'][:16])}</code>, "
                     f"{len(data['files'])} files pinned by sha256"),
        _row("Wall time", escape(", ".join(f"{k} {v / 60:.1f} min" for k, v in walls.items())
                                 + f"; total {total / 60:.1f} min")),
        _row("Generated", escape(card["generated"])),
    ]
    return (
        '<section id="model-card"><h2>Model card</h2>\n<dl class="card">' + "".join(items) + "</dl>\n"
        f'<details class="code"><summary>params file</summary><pre>{escape(params["text"])}</pre></details>\n'
        f'<details class="code"><summary>data files (sha256)</summary><pre>{escape(files)}</pre></details>'
        "</section>"
    )
