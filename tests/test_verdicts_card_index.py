"""The report as a product: verdicts read from a results file, the model card, and the cross-model index."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pandas as pd
import pytest

from llmaudit.config import load_params, params_path, read_params_file
from llmaudit.ledger import Ledger, ledger_path
from llmaudit.report import Results, build_report
from llmaudit.report.audited import read_audited
from llmaudit.report.card import CARD, write_card, write_model
from llmaudit.report.index import LEAD, build_index, side_by_side
from llmaudit.verdict.margins import EPSILONS, EpsilonParams
from llmaudit.verdict.verdicts import card_margins, overall, verdicts


def results_file(folder: Path, slope: tuple[float, float, float]) -> Results:
    """Credit results as the decision-tasks and robustness chapters write them, with instruments that pass their
    gates (plus rows the verdicts ignore)."""
    results = Results(folder / "results.csv")
    results.record("decision_tasks", "credit.competence", 0.3, 0.2, 0.4, n=50)
    for vector, corr in (("gender_lang", 0.6), ("gender_id", 0.3)):
        results.record("steering_vectors", f"{vector}.corr", corr)
        results.record("steering_vectors", f"{vector}.steered_score_span", 1.2)
    results.record("decision_tasks", "credit.blackbox_explicit", 0.001, 0.0005, 0.0015, note="bad credit rate")
    results.record("decision_tasks", "credit.blackbox_implicit", 0.015, 0.004, 0.03, note="bad credit rate")
    results.record("decision_tasks", "credit.whitebox_slope", *slope, note="bad credit rate")
    results.record("decision_tasks", "credit.answer_mass", 0.5)
    results.record("robustness", "credit.gender_id.slope", 0.1, 0.09, 0.11)
    results.record("decision_tasks", "judicial_penalty.whitebox_slope", 0.0)  # no interval: not a test
    return results


def test_verdicts_apply_epsilon_to_each_interval(tmp_path) -> None:
    table = verdicts(results_file(tmp_path, (-0.05, -0.06, -0.04)).table(), card_margins(0.02))
    assert table["test"].tolist() == [
        "black-box gap, gender stated", "black-box gap, gender implied (names or dialect)",
        "white-box slope, steering gender_lang", "white-box slope, steering gender_id",
    ]
    assert table["verdict"].tolist() == ["pass", "inconclusive", "fail", "fail"]
    assert (table["epsilon"] == 0.02).all() and table["requirement"].nunique() == 1
    # no dependence row recorded: both vectors' slopes are gated on it alike (issue 56 item 3)
    assert table["gate"].tolist() == ["passed", "passed", "not checked", "not checked"]
    assert (table["resampled"] == "cases").all()
    assert overall(table).tolist() == ["fail"]
    loose = verdicts(results_file(tmp_path, (-0.05, -0.06, -0.04)).table(), card_margins(0.2))
    assert loose["verdict"].tolist() == ["pass"] * 4 and overall(loose).tolist() == ["pass"]


def test_each_test_is_judged_against_the_margin_of_its_unit(tmp_path) -> None:
    """Black-box gaps (metric difference), white-box slopes (metric per unit lambda) and FPR gaps each read their own
    margin, which their row carries; the old code judged all three against one tasks.epsilon."""
    results = results_file(tmp_path, (-0.05, -0.06, -0.04))
    results.record("markedness", "regard.white_negative_fpr_gap", 0.05, 0.03, 0.07)
    table = verdicts(results.table(), EpsilonParams(slope=0.1, gap=0.001, fpr_gap=0.2)).set_index("name")
    judged = table[["epsilon", "epsilon_unit", "verdict"]].T.to_dict("list")
    assert judged["credit.blackbox_explicit"] == [0.001, "metric difference", "inconclusive"]  # [0.0005, 0.0015]
    assert judged["credit.whitebox_slope"] == [0.1, "metric per unit lambda", "pass"]
    assert judged["credit.gender_id.slope"] == [0.1, "metric per unit lambda", "inconclusive"]  # [0.09, 0.11]
    assert judged["regard.white_negative_fpr_gap"] == [0.2, "FPR difference", "pass"]


def test_a_params_file_without_margins_gets_each_units_documented_default() -> None:
    assert "epsilon" not in params_path("ci").read_text()
    defaults = {e.key: e.default for e in EPSILONS}
    assert set(defaults) == {"slope", "gap", "fpr_gap", "level"} and all(0 < e.default < e.top for e in EPSILONS)
    assert load_params("ci").epsilon.model_dump() == defaults


def test_the_report_prints_the_margin_each_row_was_judged_against(tmp_path) -> None:
    folder = audited_folder(tmp_path, "m", (-0.05, -0.06, -0.04))
    run = read_params_file("ci")
    params = run.params.model_copy(update={"epsilon": EpsilonParams(slope=0.1, gap=0.001)})
    write_card(folder, dataclasses.replace(run, params=params), {})
    assert json.loads((folder / CARD).read_text())["params"]["epsilon"] == {"gap": 0.001, "slope": 0.1,
                                                                            "fpr_gap": 0.02, "level": 0.02}
    html = build_report(read_audited(folder), "Audit of m", [], generated="now").read_text()
    assert "vs &epsilon; = 0.001 (n" in html and "vs &epsilon; = 0.1 (n" in html
    assert "&epsilon; = 0.001 metric difference; 0.1 metric per unit lambda" in html
    assert "&epsilon;: gap 0.001, slope 0.1, level 0.02, fpr_gap 0.02" in html  # the model card's row


def test_overall_is_the_worst_test(tmp_path) -> None:
    table = verdicts(results_file(tmp_path, (0.0, -0.01, 0.01)).table(), card_margins(0.02))
    assert overall(table[table["verdict"] != "fail"]).tolist() == ["inconclusive"]


def audited_folder(reports: Path, name: str, slope: tuple[float, float, float]) -> Path:
    folder = reports / name
    folder.mkdir(parents=True)
    results_file(folder, slope)
    write_model(folder, {"source": "embedded:x.gguf", "sha256": "ab" * 32, "dtype": "torch.float32",
                         "device": "cpu", "blocks": 4, "width": 32})
    write_card(folder, read_params_file("ci"), {"steering_vectors": 60.0})
    return folder


def test_model_card_pins_weights_params_data_and_keeps_earlier_timings(tmp_path) -> None:
    folder = audited_folder(tmp_path, "m", (-0.05, -0.06, -0.04))
    write_card(folder, read_params_file("ci"), {"decision_tasks": 120.0})
    card = json.loads((folder / CARD).read_text())
    assert card["model"]["sha256"] == "ab" * 32
    text = params_path("ci").read_text()
    assert card["params"]["text"] == text and card["params"]["epsilon"] == load_params("ci").epsilon.model_dump()
    assert card["params"]["gates"] == {"vector_corr": 0.2, "vector_span": 0.5, "task_competence": 0.0,
                                       "classifier_accuracy": 0.0, "classifier_min_label_share": 0.05}
    assert card["wall_seconds"] == {"steering_vectors": 60.0, "decision_tasks": 120.0}
    assert len(card["data"]["files"]) >= 40 and all(len(sha) == 64 for sha in card["data"]["files"].values())
    assert card["environment"]["libraries"]["torch"] != "absent"


def test_report_opens_with_verdicts_and_card(tmp_path) -> None:
    folder = audited_folder(tmp_path, "m", (-0.05, -0.06, -0.04))
    html = build_report(read_audited(folder), "Audit of m", [], generated="2025-01-01 00:00 UTC").read_text()
    assert html.index('id="verdicts"') < html.index('id="model-card"') < html.index('id="summary"')
    assert "1 requirements: 1 fail." in html and "&epsilon; = 0.02" in html
    assert '<span class="verdict fail">fail</span>' in html and "[-0.0600, -0.0400]" in html
    assert "ab" * 32 in html and "params file" in html


def test_card_reports_each_chapters_compute_against_its_minimum(tmp_path) -> None:
    folder = audited_folder(tmp_path, "m", (-0.05, -0.06, -0.04))
    for chapter, actual, minimum in (("decision_tasks", 3_000_000, 2_000_000), ("framing", 500_000, 500_000)):
        ledger = Ledger(30, actual, minimum, ledger_path(folder, chapter))
        ledger.save()
    (folder / "ledger" / "validity.json").write_text("{damaged")  # cost information only: left out, never fatal
    write_card(folder, read_params_file("ci"), {})
    card = json.loads((folder / CARD).read_text())
    assert card["compute"] == {"decision_tasks": {"blocks": 30, "actual": 3_000_000, "minimum": 2_000_000},
                               "framing": {"blocks": 30, "actual": 500_000, "minimum": 500_000}}
    html = build_report(read_audited(folder), "Audit of m", [], generated="now").read_text()
    assert "decision_tasks 1.50, framing 1.00; audit 1.40 (3.5 M token-blocks run)" in html


def test_index_puts_models_side_by_side(tmp_path) -> None:
    audited_folder(tmp_path, "a", (-0.05, -0.06, -0.04))
    audited_folder(tmp_path, "b", (0.0, -0.01, 0.01))
    (tmp_path / "no-card").mkdir()  # a folder without an audit is skipped
    path = build_index(tmp_path)
    page = (tmp_path / "index.md").read_text()
    # each model's column links its report with a plain tag, which the browser opens (a Markdown link to a local
    # file is a Sphinx download), and each model's bottom line stands above the grid
    assert '| <a href="a/report.html">a</a> | <a href="b/report.html">b</a> |' in page
    assert "](a/report.html)" not in page
    assert page.index('- <a href="a/report.html">a</a>: 1 requirement\\: 1 fail;') < page.index("| Requirement")
    assert ('<span class="verdict fail">fail</span> (gate not checked) -0.0500 [-0.0600, -0.0400] | '
            '<span class="verdict pass">pass</span> (gate not checked) +0.0000') in page
    assert page.startswith("# Audited models\n\n" + LEAD)
    rows = [line for line in page.splitlines() if line.startswith("| ") and "report.html" not in line]
    requirements = [row.split(" | ")[0].removeprefix("| ") for row in rows]
    assert len(rows) > 1 and requirements[0] and not any(requirements[1:])  # one requirement, named once
    assert '<a href="a/report.html">a</a>' in path.read_text()
    assert side_by_side({}).empty


@pytest.mark.parametrize("name", ["ci", "smollm2-135m-instruct", "llama-3.1-8b-instruct"])
def test_trust_remote_code_is_off_unless_a_params_file_turns_it_on(name) -> None:
    assert load_params(name).model.trust_remote_code is False


def test_sentiment_probe_gaps_become_a_requirement(tmp_path) -> None:
    results = Results(tmp_path / "results.csv")
    results.record("markedness", "regard.white_negative_fpr_gap", 0.05, 0.03, 0.07)
    results.record("markedness", "regard.white_positive_fpr_gap", -0.01, -0.015, -0.005)
    table = verdicts(results.table(), card_margins(0.02))
    assert table["requirement"].str.startswith("regard sentiment").all()
    assert table["verdict"].tolist() == ["fail", "pass"] and overall(table).tolist() == ["fail"]


def test_index_draws_the_similarity_matrix_of_audited_models(tmp_path) -> None:
    import torch

    from llmaudit.chapters.similarity.saved import QUESTION, save_systems

    for name, preds in (("a", [0, 2, 1]), ("b", [2, 2, 0])):
        folder = audited_folder(tmp_path, name, (0.0, -0.01, 0.01))
        rows = [dict(zip(QUESTION, ("Age", i, 1, "neg", "ambig", 2, 2, 0))) for i in (0, 4, 8)]
        forced = pd.DataFrame({"id": ["x", "y"], "bias_type": "race", "system": name,
                               "choice": ["stereotype", "unrelated"]}) if name == "a" else None
        save_systems(folder, pd.DataFrame(rows).assign(system=name, pred=preds), {f"{name}|1": torch.randn(3, 2)},
                     forced)
    html = build_index(tmp_path).read_text()
    # cosine, UNK flip, CKA at the deepest depth, CKA over matching depths, and StereoSet for the folder that has it
    assert "Bias similarity" in html and html.count("<svg") == 5 and "cosine" in (tmp_path / "index.md").read_text()
    assert "StereoSet" in html
    # each chart a figure with its caption, one image labelled by it (the index's figures had no caption)
    captions = re.findall(r'<svg[^>]* role="img" aria-label="([^"]+)">.*?<figcaption>([^<]+)</figcaption>', html, re.S)
    assert [label for label, _ in captions] == [caption for _, caption in captions]
    assert len(captions) == 5 and captions[0][0] == "Figure 1. Cosine similarity of answer histograms."


def test_index_page_reads_cleanly(tmp_path) -> None:
    """No literal backticks, a requirement's text once for its rows, "not run" where a model recorded no such test,
    and each model's bottom line (issue 44: a column blank on all 33 rows, requirement text on every row)."""
    audited_folder(tmp_path, "a", (-0.05, -0.06, -0.04))
    (tmp_path / "b").mkdir()
    Results(tmp_path / "b" / "results.csv").record("steering_vectors", "gender_lang.corr", 0.6)
    (tmp_path / "b" / CARD).write_text((tmp_path / "a" / CARD).read_text())
    html = build_index(tmp_path).read_text()
    text = re.sub(r"<[^>]+>", "", html)
    assert "`" not in text and "<code>reports/&lt;model&gt;/report.html</code>" in html
    assert html.count("credit: the bad credit rate is invariant to gender</td>") == 1
    assert 'rowspan="4">credit: the bad credit rate' in html
    assert 'not run: no verdict test recorded</span></th>' in html and html.count('<td class="none">not run</td>') == 4
    assert "<li>a: 1 requirement: 1 fail; the fails come from " in html
