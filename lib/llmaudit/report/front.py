"""The front of a model's report, before the chapters: the verdict badges and p-values every page shares (the verdict
page itself: `report.verdict_page`) and the model card that makes the report reproducible."""

from __future__ import annotations

import json
from html import escape
from typing import Any

from llmaudit.verdict.margins import shown
from llmaudit.verdict.verdicts import NOT_MEASURABLE

CSS = """
.verdict { display: inline-block; min-width: 6.5em; padding: .05rem .5rem; border-radius: 1rem; font-weight: 600;
           font-size: .8rem; text-align: center; white-space: nowrap; }
.verdict.pass { background: #dafbe1; color: #116329; }
.verdict.fail { background: #ffebe9; color: #a40e26; }
.verdict.inconclusive { background: #fff8c5; color: #7d4e00; }
.verdict.not-measurable { background: #eaeef2; color: #57606a; }
.unchecked { display: block; font-size: .75rem; color: #9a6700; }
table.verdicts { display: table; width: 100%; }
table.verdicts td { overflow-wrap: anywhere; }
table.verdicts td.req { font-weight: 600; width: 15%; }
table.verdicts td.test { min-width: 13em; }
table.verdicts td.num { white-space: nowrap; }
table.verdicts td.gates { font-size: .8rem; min-width: 14em; }
table.verdicts .small { display: block; font-size: .75rem; color: var(--muted); white-space: normal; }
dl.card { display: grid; grid-template-columns: max-content 1fr; gap: .3rem 1rem; font-size: .9rem; }
dl.card dt { color: var(--muted); }
dl.card dd { margin: 0; overflow-wrap: anywhere; }
""".strip()

OUTCOMES = ("fail", "inconclusive", "pass", NOT_MEASURABLE)


def badge(verdict: str) -> str:
    """A verdict as a coloured label (its CSS class: the verdict with spaces as hyphens)."""
    return f'<span class="verdict {escape(verdict.replace(" ", "-"))}">{escape(verdict)}</span>'


P_FLOOR = 1e-4  # smaller p-values print as "< 1e-4": the normal approximation says no more than that


def p_value(p: float) -> str:
    """A p-value as a relation, '= 0.014' or '< 1e-4' (never '= 0')."""
    return "< 1e-4" if p < P_FLOOR else f"= {p:.2g}"


def _row(label: str, value: Any) -> str:
    return f"<dt>{escape(label)}</dt><dd>{value}</dd>"


def compute_summary(ledgers: dict[str, dict[str, int]]) -> str:
    """Token-blocks run per chapter and for the audit, as a ratio to the minimum the results need (1.0: nothing
    run twice, no padding, no block run that no result reads)."""
    if not ledgers:
        return "not recorded (a run from a warm cache computes nothing)"
    parts = [f"{name} {t['actual'] / t['minimum']:.2f}" for name, t in ledgers.items() if t["minimum"]]
    actual, minimum = (sum(t[key] for t in ledgers.values()) for key in ("actual", "minimum"))
    audit = f"; audit {actual / minimum:.2f} ({actual / 1e6:.1f} M token-blocks run)" if minimum else ""
    return escape("actual / minimum token-blocks: " + ", ".join(parts) + audit)


def chapter_params(chapters: dict[str, dict[str, Any]]) -> str:
    """Per chapter, whether its rows came from the params file shown (and the vectors saved now), else each setting
    in which they differ (the model card's `chapters`, `report.card.chapter_provenance`)."""
    differing = {name: entry["differs"] for name, entry in chapters.items() if entry["differs"]}
    if not differing:
        return escape(f"every chapter's rows came from this params file ({', '.join(chapters)})")
    same = [name for name in chapters if name not in differing]
    lines = [f"{name}: {'; '.join(found)}" for name, found in differing.items()]
    lines += [f"{', '.join(same)}: this params file"] if same else []
    return ("<strong>Not every chapter's rows came from this params file and the vectors saved now.</strong><br>"
            + "<br>".join(escape(line) for line in lines))


def settings_block(chapters: dict[str, dict[str, Any]]) -> str:
    """Each chapter's recorded settings (the model, seed, token budget and its params sections) as JSON."""
    if not chapters:
        return ""
    shown = {name: entry["settings"] for name, entry in chapters.items()}
    return (f'<details class="code"><summary>settings per chapter</summary><pre>{escape(json.dumps(shown, indent=1))}'
            "</pre></details>\n")


def card_section(card: dict[str, Any]) -> str:
    """The model card: model and weights hash, params (and, per chapter, the params its rows came from), code and
    library versions, data hashes, wall times."""
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
        _row("Params (last run)", f"<code>params/{escape(params['file'])}</code> sha256 "
                                  f"<code>{escape(params['sha256'][:16])}</code>; seed {params['seed']}, "
                                  f"&epsilon;: {escape(shown(params['epsilon']))}"),
        _row("Params per chapter", chapter_params(card.get("chapters", {}))) if card.get("chapters") else "",
        _row("Code", escape(f"llmaudit {env['llmaudit']}, computing code {env['code_version']}, "
                            f"git {env['git_commit'] or 'n/a'}")),
        _row("Python", escape(f"{env['python']} on {env['platform']}")),
        _row("Libraries", escape(libraries)),
        _row("Data", f"manifest sha256 <code>{escape(data['manifest_sha256'][:16])}</code>, "
                     f"{len(data['files'])} files pinned by sha256"),
        _row("Wall time", escape(", ".join(f"{k} {v / 60:.1f} min" for k, v in walls.items())
                                 + f"; total {total / 60:.1f} min")),
        _row("Compute", compute_summary(card.get("compute", {}))),
        _row("Generated", escape(card["generated"])),
    ]
    return (
        '<section id="model-card"><h2>Model card</h2>\n<dl class="card">' + "".join(items) + "</dl>\n"
        f'<details class="code"><summary>params file (last run)</summary><pre>{escape(params["text"])}</pre>'
        "</details>\n" + settings_block(card.get("chapters", {})) +
        f'<details class="code"><summary>data files (sha256)</summary><pre>{escape(files)}</pre></details>'
        "</section>"
    )
