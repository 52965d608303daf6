"""An audit's results are read once: every writer of an audit run (results.json, the HTML report, the index) takes
the value `read_audited` returns, so what they show is one reading of the report folder, even if its files change or
go away while they write."""

from __future__ import annotations

import json
import shutil

from llmaudit.config import read_params_file
from llmaudit.report import Results, build_report
from llmaudit.report.audited import read_audited
from llmaudit.report.card import CARD, write_card
from llmaudit.report.evidence import write_cases
from llmaudit.report.index import build_index
from llmaudit.report.results_json import results_document
from test_evidence import records

GENERATED = "2025-01-01 00:00 UTC"


def test_the_writers_show_the_results_as_read_once(tmp_path) -> None:
    folder = tmp_path / "ci"
    folder.mkdir()
    write_card(folder, read_params_file("ci"), {})
    results = Results(folder / "results.csv")
    results.record("decision_tasks", "credit.blackbox_explicit", 0.0833, 0.05, 0.12, n=6)  # fails: its cases shown
    results.record("decision_tasks", "credit.whitebox_slope", 0.0, -0.01, 0.01, n=6)
    write_cases(folder, "decision_tasks", records())
    audited = read_audited(folder)
    assert not audited.verdicts.empty and audited.provenance == audited.card.get("chapters", {})
    document = results_document(audited)
    page = build_report(audited, "Audit", [], generated=GENERATED).read_text(encoding="utf-8")
    assert "Cases behind the gaps" in page

    for gone in ("results.csv", CARD):  # the folder as another process might leave it
        (folder / gone).unlink()
    shutil.rmtree(folder / "cases")
    assert json.dumps(results_document(audited)) == json.dumps(document)
    assert build_report(audited, "Audit", [], generated=GENERATED).read_text(encoding="utf-8") == page
    index = build_index(tmp_path, audited).read_text(encoding="utf-8")
    assert '<a href="ci/report.html">ci</a>' in index
    assert "black-box gap, gender stated" in index
