"""A summary a regulator can sign (issue 56 item 6): summary.html beside the report, linked from its first screen,
with every requirement's verdict and meaning as the first screen gives them, the limits, the hashes that pin the run
and lines to sign; static (no scripts). Measured by hand: the paper-size stand-in audit's (13 requirements) prints on
two A4 pages in headless Chromium."""

from __future__ import annotations

import re
from html import escape
from pathlib import Path

from llmaudit.config import read_params_file
from llmaudit.report import build_report
from llmaudit.report.answer import answers
from llmaudit.report.audited import read_audited
from llmaudit.report.card import write_card
from llmaudit.report.limits import limits
from llmaudit.report.results_json import results_document
from llmaudit.report.summary_page import NAME
from test_answer import audited


def test_the_summary_holds_every_answer_the_limits_the_pins_and_a_sign_off(tmp_path: Path) -> None:
    folder = audited(tmp_path)
    write_card(folder, read_params_file("ci"), {})
    report = build_report(read_audited(folder), "Audit", []).read_text()
    assert f'<a href="{NAME}">summary</a>' in report
    page = (folder / NAME).read_text()
    document = results_document(read_audited(folder))
    rows = re.findall(r"<tr><td>([^<]+)</td><td><span class=\"verdict", page)
    assert rows == [escape(a.requirement) for a in answers(document)]
    for line in [m for a in answers(document) for m in a.meaning] + limits(document):
        assert escape(line) in page
    assert document["config"]["sha256"] in page and document["versions"]["code_version"] in page
    assert "<th>Reviewer</th><th>Role</th><th>Date</th><th>Signature</th>" in page
    assert "<script" not in page and "@page" in page
