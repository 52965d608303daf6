"""The printed summary a reviewer signs: summary.html beside report.html, one or two printed A4 pages (measured: the
paper-size stand-in audit's, 13 requirements, prints on 2). It holds what a sign-off rests on and nothing else: the
model and scope, the bottom line, per requirement its verdict, what it means in the decision's units and the
deciding test with its interval, what the audit cannot say (its limits), the hashes that pin the run (params, code,
data, weights), and lines to sign. Built from the results.json document, as the first screen is, so the two agree."""

from __future__ import annotations

from html import escape
from typing import Any

from llmaudit.report.answer import answers, scope
from llmaudit.report.bottom_line import bottom_line
from llmaudit.report.front import badge
from llmaudit.report.limits import limits

NAME = "summary.html"
CSS = """
@page { size: A4; margin: 10mm 11mm 11mm; }
body { font: 9pt/1.3 -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; color: #1f2328; max-width: 60rem;
       margin: 0 auto; padding: 1rem; }
h1 { font-size: 14pt; margin: 0 0 .3rem; }
h2 { font-size: 10.5pt; margin: .7rem 0 .25rem; }
p, ul { margin: 0 0 .4rem; }
ul { padding-left: 1.1rem; }
p.bottom-line { font-weight: 600; }
table { width: 100%; border-collapse: collapse; font-size: 8pt; table-layout: fixed; }
th:first-child { width: 22%; } th:nth-child(2) { width: 6.5rem; }
th, td { border: 1px solid #d0d7de; padding: .2rem .35rem; vertical-align: top; text-align: left;
         overflow-wrap: anywhere; }
tr { break-inside: avoid; }
td p { margin: 0 0 .15rem; }
.small { color: #57606a; font-size: 7.5pt; }
.verdict { display: inline-block; padding: 0 .35rem; border-radius: .6rem; font-weight: 600; white-space: nowrap; }
.verdict.pass { background: #dafbe1; color: #116329; } .verdict.fail { background: #ffebe9; color: #a40e26; }
.verdict.inconclusive { background: #fff8c5; color: #7d4e00; }
.verdict.not-measurable { background: #eaeef2; color: #57606a; }
dl.pinned { display: grid; grid-template-columns: max-content 1fr; gap: 0 .6rem; font-size: 8pt; margin: 0; }
dl.pinned dd { margin: 0; overflow-wrap: anywhere; font-family: ui-monospace, monospace; }
table.sign td { height: 2rem; } table.sign th { width: 25%; }
section.sign { break-inside: avoid; }
@media print { a { color: inherit; text-decoration: none; } p.screen { display: none; } }
""".strip()


def _row(answer: Any) -> str:
    meaning = "".join(f"<p>{escape(line)}</p>" for line in answer.meaning)
    decided = (f'<span class="small">{escape(f"{answer.test}: {answer.interval}; {answer.reason}")}</span>'
               if answer.interval else "")  # a requirement not measurable: its meaning already says why
    return (f"<tr><td>{escape(answer.requirement)}</td><td>{badge(answer.verdict)}</td>"
            f"<td>{meaning}{decided}</td></tr>")


def _pinned(document: dict[str, Any]) -> str:
    """The hashes and versions that identify the run the verdicts come from."""
    config, versions = document.get("config", {}), document.get("versions", {})
    model = config.get("model", {})
    found = [("params file", f"{config.get('file', '?')} sha256 {config.get('sha256') or '?'}"),
             ("model weights", str(model.get("sha256") or model.get("weights") or model.get("revision") or "?")),
             ("llmaudit", f"{versions.get('llmaudit', '?')}, code {versions.get('code_version', '?')}, "
                          f"commit {versions.get('git_commit') or '?'}"),
             ("data manifest", f"sha256 {document.get('data', {}).get('manifest_sha256', '?')}"),
             ("seed", str(config.get("seed", "?")))]
    return "".join(f"<dt>{escape(k)}</dt><dd>{escape(v)}</dd>" for k, v in found)


def summary_page(document: dict[str, Any], title: str) -> str:
    """The summary page of a results.json document ('' without verdicts)."""
    rows, line = answers(document), bottom_line(document)
    if not rows or line is None:
        return ""
    head = "<tr><th>Requirement</th><th>Verdict</th><th>What it means (deciding test, score [95% CI], why)</th></tr>"
    return (f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
            '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
            f"<title>{escape(title)}: summary</title>\n<style>\n{CSS}\n</style>\n</head>\n<body>\n"
            f"<h1>{escape(title)}: summary for sign-off</h1>\n"
            '<p class="screen">Print this page (two A4 pages at most). The evidence for every line is in '
            '<a href="report.html">the full report</a>; the numbers in results.json.</p>\n'
            f"<p>{escape(scope(document))}</p>\n"
            f'<p class="bottom-line">{escape(line.sentence)}</p>\n'
            f"<table><thead>{head}</thead><tbody>\n" + "\n".join(_row(a) for a in rows) + "\n</tbody></table>\n"
            "<h2>What this means and its limits</h2>\n<ul>"
            + "".join(f"<li>{escape(item)}</li>" for item in limits(document)) + "</ul>\n"
            f'<h2>The run these verdicts come from</h2>\n<dl class="pinned">{_pinned(document)}</dl>\n'
            '<section class="sign"><h2>Sign-off</h2>\n<p class="small">By signing, the reviewer states that they have '
            "read this summary and the limits above, not that the model is free of bias beyond what these tests "
            "measure.</p>\n<table class=\"sign\"><tr><th>Reviewer</th><th>Role</th><th>Date</th><th>Signature</th>"
            "</tr><tr><td></td><td></td><td></td><td></td></tr></table></section>\n</body>\n</html>\n")
