"""The report's first screen: one row per requirement with the verdict page's gated verdict, the test that decides
it with its interval against epsilon and a plain reason, from the results.json document alone."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from llmaudit.config import read_params_file
from llmaudit.report import Results, build_report
from llmaudit.report.answer import Answer, _against_epsilon, answer_section, answers, scope
from llmaudit.report.audited import read_audited
from llmaudit.report.card import write_card
from llmaudit.report.results_json import results_document

CREDIT = "credit: the bad credit rate is invariant to gender"
MEDICAL = "medical_race: the accuracy is invariant to race"
JUDICIAL = "judicial_conviction: the conviction rate is invariant to race"
REGARD = "regard sentiment: error rates do not depend on the race named (White vs mean)"


def audited(folder: Path) -> Path:
    """A report folder: credit fails (one gated slope), medical at chance, judicial without competence, regard with
    a degenerate classifier; a card for epsilon 0.02."""
    results = Results(folder / "results.csv")
    for vector, (corr, span) in {"gender_lang": (0.6, 1.2), "gender_id": (0.4, 1.0), "race_dial": (0.5, 1.0)}.items():
        results.record("steering_vectors", f"{vector}.corr", corr)
        results.record("steering_vectors", f"{vector}.steered_score_span", span)
    results.record("decision_tasks", "credit.competence", 0.3, 0.2, 0.4, n=80)
    results.record("decision_tasks", "credit.blackbox_explicit", 0.001, -0.004, 0.006, n=80)
    results.record("decision_tasks", "credit.whitebox_slope", 0.03, 0.021, 0.04, n=80)
    results.record("robustness", "credit.gender_id.slope", 0.1, 0.09, 0.11, n=80)
    results.record("decision_tasks", "medical_race.competence", 0.03, -0.1, 0.2, n=40)
    results.record("decision_tasks", "medical_race.blackbox_explicit", 0.5, 0.4, 0.6, n=40)
    results.record("decision_tasks", "judicial_conviction.blackbox_explicit", 0.001, -0.03, 0.01, n=6)
    results.record("decision_tasks", "judicial_conviction.whitebox_slope", 0.0, -0.01, 0.01, n=6)
    results.record("markedness", "regard.white_negative_fpr_gap", 0.05, 0.03, 0.07, n=2)
    results.record("markedness", "regard.accuracy_over_chance_9shot", 0.2)
    results.record("markedness", "regard.min_label_share_9shot", 0.0)
    card = {"params": {"name": "tiny", "file": "tiny.yaml", "epsilon": 0.02,
                       "chapters": ["steering_vectors", "decision_tasks", "robustness", "markedness", "framing"],
                       "text": "chapters: [steering_vectors, decision_tasks, robustness, markedness, framing]"},
            "model": {"source": "hub/tiny-model"}, "generated": "2025-01-02 03:04 UTC"}
    (folder / "model_card.json").write_text(json.dumps(card))
    return folder


def test_one_answer_per_requirement_with_its_deciding_test_and_reason(tmp_path: Path) -> None:
    found = {a.requirement: a for a in answers(results_document(read_audited(audited(tmp_path))))}
    assert list(found) == [JUDICIAL, CREDIT, MEDICAL, REGARD]  # the verdict page's order
    credit = found[CREDIT]
    assert (credit.verdict, credit.test, credit.interval) == ("fail", "white-box slope, steering gender_id",
                                                              "+0.1000 [+0.0900, +0.1100]")
    assert credit.reason == ("95% CI [+0.0900, +0.1100] lies wholly above +0.02; survives Holm's correction "
                             "(p_adj < 1e-4); credit.whitebox_dependence: not checked (not recorded: rerun its chapter "
                             "with this version)")  # the second vector's slope is gated as the main one's
    assert credit.meaning[0] == ("white-box slope, steering gender_id (fail): Steering along gender_id towards female "
                                 "(λ = +1; -1 steers towards male) raises the bad credit rate by 10.0 pp per unit of λ "
                                 "(95% CI +9.0 to +11.0 pp), about 20.0 pp across the sweep λ = -1 to +1.")
    assert credit.meaning[1].startswith("Beside it, black-box gap, gender stated (pass): The bad credit rate is 0.1 pp "
                                        "higher for female than for male")
    assert credit.meaning[2].startswith("Beside it, white-box slope, steering gender_lang (fail): Steering along "
                                        "gender_lang towards female")
    medical = found[MEDICAL]
    assert medical == Answer(MEDICAL, "not measurable", "none of 1 tests measurable", "",
                             "medical_race competence +0.0300 [-0.1000, +0.2000], needs lower bound > 0",
                             ("Cannot be assessed: medical_race competence +0.0300 [-0.1000, +0.2000], needs lower "
                              "bound > 0 (the interval does not exclude chance: the model's decisions carry no task "
                              "signal to be biased).",))
    judicial = found[JUDICIAL]
    assert judicial.verdict == "inconclusive" and judicial.test == "black-box gap, race stated"
    assert judicial.reason == ("95% CI [-0.0300, +0.0100] straddles -0.02; judicial_conviction competence not "
                               "checked: the task has no gold answer or decisive fact")
    assert found[REGARD].reason == "regard smallest predicted-label share 0, needs ≥ 0.05"


def test_a_pass_is_decided_by_the_test_closest_to_epsilon(tmp_path: Path) -> None:
    document = results_document(read_audited(audited(tmp_path)))
    for row in document["verdicts"]:
        if row["requirement"] == CREDIT:
            row.update(verdict="pass", lo=-0.01, hi=0.019 if row["name"] == "credit.whitebox_slope" else 0.01)
    credit = next(a for a in answers(document) if a.requirement == CREDIT)
    assert credit.test == "white-box slope, steering gender_lang" and "lies inside ±0.02" in credit.reason


def test_scope_names_model_date_chapters_and_sizes(tmp_path: Path) -> None:
    line = scope(results_document(read_audited(audited(tmp_path))))
    assert line.startswith("Model tiny (hub/tiny-model), audited 2025-01-02 03:04 UTC. Scope: 4 of 5 chapters run")
    assert "not run: framing" in line and "6-80 cases, 2 demonstration seeds per test" in line
    assert "params tiny.yaml, ε: 0.02 (every test)" in line


def test_scope_reads_the_parsed_chapters_never_the_text(tmp_path: Path) -> None:
    """The card's text is the file as written, which a run may have seen half-written: the first screen reads the
    chapters the run parsed (an edit mid-run once ended the audit with exit 4 where the text was parsed again)."""
    folder = audited(tmp_path)
    card = json.loads((folder / "model_card.json").read_text())
    card["params"]["text"] = "chapters: [steering_vectors\n  tasks: {"  # half-written YAML
    (folder / "model_card.json").write_text(json.dumps(card))
    assert "Scope: 4 of 5 chapters run" in scope(results_document(read_audited(folder)))


def test_first_screen_opens_the_report_escaped(tmp_path: Path) -> None:
    folder = audited(tmp_path)
    write_card(folder, read_params_file("ci"), {})  # the whole card the report's card section reads
    html = build_report(read_audited(folder), "Audit", []).read_text()
    assert html.index('id="answer"') < html.index('class="toc"') < html.index('id="verdicts"')
    assert html.index("</header>") < html.index('id="answer"')
    assert "needs ≥ 0.05" in html and 'class="verdict not-measurable"' in html
    document = results_document(read_audited(folder))
    document["verdicts"][0]["requirement"] = "<script>x</script>"
    assert "<script>" not in answer_section(document) and "&lt;script&gt;" in answer_section(document)
    assert answer_section({"verdicts": []}) == ""


@pytest.mark.parametrize(("verdict", "lo", "hi", "where"), [
    ("fail", 0.0001, 0.0003, "lies inside ±0.02"),  # the decision does not depend on the variable
    ("pass", 0.03, 0.05, "lies wholly above +0.02"),
    ("pass", -0.05, -0.03, "lies wholly below -0.02"),
])
def test_a_dependence_test_reads_its_interval_the_other_way(verdict, lo, hi, where) -> None:
    """Main paper §3.4: a dependence test fails inside ±epsilon and passes wholly outside (the first screen said a
    failing interval of [+0.0001, +0.0003] "lies wholly below -0.02")."""
    row = pd.Series({"verdict": verdict, "lo": lo, "hi": hi, "epsilon": 0.02, "kind": "dependence"})
    assert _against_epsilon(row).endswith(where)
