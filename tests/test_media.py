"""The report printed and on a phone (issue 56 item 6): printing unfolds what the verdicts depend on and hides only
code, and a narrow screen stacks the first screen's table. Read from the page's own style sheet."""

from __future__ import annotations

import re
from pathlib import Path

from llmaudit.config import read_params_file
from llmaudit.report import build_report
from llmaudit.report.audited import read_audited
from llmaudit.report.card import write_card
from test_answer import audited


def _block(css: str, query: str) -> str:
    """The body of the first @media block whose query starts with `query` (braces balanced)."""
    start = css.index("{", css.index(f"@media {query}")) + 1
    depth, end = 1, start
    while depth:
        depth += {"{": 1, "}": -1}.get(css[end], 0)
        end += 1
    return css[start:end - 1]


def test_printing_unfolds_every_fold_but_code_and_a_phone_stacks_the_first_screen(tmp_path: Path) -> None:
    folder = audited(tmp_path)
    write_card(folder, read_params_file("ci"), {})
    css = re.search(r"<style>(.*)</style>", build_report(read_audited(folder), "Audit", []).read_text(), re.S).group(1)
    printed = _block(css, "print")
    assert "details::details-content { content-visibility: visible; display: block; }" in printed
    hidden = re.findall(r"([^{}]+)\{[^}]*display:\s*none", printed)
    assert [h.strip() for h in hidden] == ["details > summary::-webkit-details-marker",
                                           "details.code:has(> pre > code)", "nav.toc"]  # code cells, no gates
    assert "overflow: visible" in printed and "tr, pre" in printed  # no printed scroll bar; breaks between rows
    phone = _block(css, "(max-width: 640px)")
    assert "table.answer thead, table.verdicts thead { display: none; }" in phone


def test_a_phone_shows_figures_at_their_drawn_size_scrolling_within_themselves(tmp_path: Path) -> None:
    """Shrunk to 390 px, a two-panel figure's labels were about 5 px: too small to read."""
    folder = audited(tmp_path)
    write_card(folder, read_params_file("ci"), {})
    css = re.search(r"<style>(.*)</style>", build_report(read_audited(folder), "Audit", []).read_text(), re.S).group(1)
    phone = _block(css, "(max-width: 640px)")
    assert "figure { overflow-x: auto; }" in phone and "figure svg { max-width: none; }" in phone
