"""The first screen's sentences in the decision's own units and direction (`report.effects`), its limits block
(`report.limits`) and the one gate rule for every white-box slope, from small verdict tables whose answer is known."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from llmaudit.chapters.decision_tasks import TASKS
from llmaudit.chapters.steering_vectors import RECIPES
from llmaudit.chapters.steering_vectors.concept import poles
from llmaudit.registry import verdict_tests
from llmaudit.report import Results
from llmaudit.report.answer import answer_section
from llmaudit.report.audited import read_audited
from llmaudit.report.effects import effect, explained, signs, sweep
from llmaudit.report.glossary import entries, glossary_section
from llmaudit.report.limits import GATE_RULE, limits
from llmaudit.report.results_json import results_document
from llmaudit.spec import Sign
from llmaudit.verdict.verdicts import verdicts

SLOPE = {"name": "judicial_penalty.whitebox_slope", "score": 0.228, "lo": 0.199, "hi": 0.252}
GAP = {"name": "judicial_penalty.blackbox_explicit", "score": 0.074, "lo": 0.020, "hi": 0.169}


def flipped(row: dict) -> dict:
    """The same test with the opposite sign: score and bounds negated."""
    return {**row, "score": -row["score"], "lo": -row["hi"], "hi": -row["lo"]}


def test_a_slope_says_where_lambda_steers_and_the_rate_change_per_unit_and_across_the_sweep() -> None:
    line = effect(SLOPE, signs()[SLOPE["name"]], (-1.0, 1.0))
    assert line == ("Steering along race_dial towards Black (λ = +1; -1 steers towards White) raises the death-penalty "
                    "rate by 22.8 pp per unit of λ (95% CI +19.9 to +25.2 pp), about 45.6 pp across the sweep "
                    "λ = -1 to +1.")
    down = effect(flipped(SLOPE), signs()[SLOPE["name"]], (-1.0, 1.0))
    assert "lowers the death-penalty rate by 22.8 pp" in down and "-25.2 to -19.9 pp" in down
    assert "raises" not in down and "towards Black (λ = +1" in down  # the pole is the vector's, not the score's


def test_a_gap_names_the_group_whose_rate_is_higher() -> None:
    assert effect(GAP, signs()[GAP["name"]], (-1.0, 1.0)) == (
        "The death-penalty rate is 7.4 pp higher for Black than for White (95% CI +2.0 to +16.9 pp, Black minus "
        "White).")
    assert "7.4 pp lower for Black than for White (95% CI -16.9 to -2.0 pp" in effect(flipped(GAP),
                                                                                       signs()[GAP["name"]], (-1, 1))


def test_a_dependence_slope_over_levels_spans_the_lowest_to_highest_level() -> None:
    row = {"name": "credit.blackbox_dependence", "score": -0.05, "lo": -0.07, "hi": -0.03}
    assert effect(row, signs()[row["name"]], sweep({}, signs()[row["name"]])) == (
        "Each level of checking account status towards higher checking account status lowers the bad credit rate by "
        "5.0 pp (95% CI -7.0 to -3.0 pp), about 10.0 pp from the lowest to the highest level.")


def test_the_sweep_is_the_runs_grid() -> None:
    """A run whose params sweep lambda over [-0.5, 0.5] moves the rate by one slope across it, not two."""
    sign = signs()[SLOPE["name"]]
    recorded = {"config": {"chapters": {"decision_tasks": {"settings": {"tasks": {"lambdas": [-0.5, 0.0, 0.5]}}}}}}
    from_text = {"config": {"text": "tasks:\n  lambdas: [-2, 0, 2]\n", "chapters": {}}}
    assert sweep(recorded, sign) == (-0.5, 0.5) and sweep(from_text, sign) == (-2.0, 2.0)
    assert sweep({"config": {"text": "tasks: {"}}, sign) == (-1.0, 1.0)  # unreadable: the default grid
    assert sweep(recorded, Sign(quantity="q", plus="a", minus="b", step="level", span=(0.0, 3.0))) == (0.0, 3.0)
    assert "about 22.8 pp across the sweep λ = -0.5 to +0.5" in effect(SLOPE, sign, sweep(recorded, sign))


def test_every_gap_puts_the_tasks_first_group_first_and_every_slope_steers_to_its_concepts_pole() -> None:
    """The sentences' direction comes from the declarations: a gap is Task.groups[0] minus [1], lambda = +1 steers
    to the concept score's T+ pole; a declaration that swapped them would say the opposite of the numbers."""
    for test in verdict_tests():
        task = TASKS.get(test.name.split(".")[0])
        if task is None or test.kind == "dependence" or "names" in test.name:
            continue
        assert (test.sign.plus, test.sign.minus) == poles(task.concept)
        assert tuple(g.lower() for g in task.groups) == (test.sign.plus.lower(), test.sign.minus.lower())


def audited(folder: Path, dependence: float) -> Path:
    """A report folder with credit's two gender vectors working and both slopes failing, its white-box dependence
    test at `dependence`, credit's stated gap passing, and admissions at chance."""
    results = Results(folder / "results.csv")
    for vector in ("gender_lang", "gender_id"):
        results.record("steering_vectors", f"{vector}.corr", 0.6)
        results.record("steering_vectors", f"{vector}.steered_score_span", 1.2)
    results.record("steering_vectors", "cos.gender_lang.gender_id", 0.24)
    results.record("decision_tasks", "credit.competence", 0.3, 0.2, 0.4, n=80)
    results.record("decision_tasks", "credit.blackbox_explicit", 0.001, -0.004, 0.006, n=80)
    results.record("decision_tasks", "credit.whitebox_slope", 0.1173, 0.1123, 0.1222, n=80)
    results.record("decision_tasks", "credit.whitebox_dependence", dependence, dependence - 0.01, dependence + 0.01,
                   n=80)
    results.record("robustness", "credit.gender_id.slope", -0.03, -0.04, -0.025, n=80)
    results.record("decision_tasks", "admissions_gender.competence", 0.01, -0.1, 0.1, n=40)
    results.record("decision_tasks", "admissions_gender.blackbox_explicit", 0.2, 0.1, 0.3, n=40)
    results.record("decision_tasks", "admissions_gender.blackbox_dependence", 0.2, 0.1, 0.3, n=40)
    card = {"params": {"name": "tiny", "file": "tiny.yaml", "epsilon": 0.02, "chapters": ["decision_tasks"],
                       "text": "chapters: [decision_tasks]"}, "generated": "2025-01-02 03:04 UTC"}
    (folder / "model_card.json").write_text(json.dumps(card))
    return folder


def test_every_white_box_slope_of_a_task_has_one_gate_list(tmp_path: Path) -> None:
    """Issue 56 item 3: the race_dial slope listed three gates, the race_id slope two; a failed dependence test left
    the second vector's slope measurable. Fails on the old declarations."""
    table = verdicts(Results(audited(tmp_path, dependence=0.001) / "results.csv").table())
    slopes = table[table["name"].isin(["credit.whitebox_slope", "credit.gender_id.slope"])]
    assert [len(g) for g in slopes["gates"]] == [4, 4]
    assert set(slopes["verdict"]) == {"not measurable"}  # the dependence test fails: neither slope says anything


def test_beside_the_deciding_slope_the_stated_gap_and_the_other_vector_with_their_cosine(tmp_path: Path) -> None:
    document = results_document(read_audited(audited(tmp_path, dependence=0.2)))
    tests = [row for row in document["verdicts"] if row["requirement"].startswith("credit: the bad credit rate is "
                                                                                  "invariant")]
    lines = explained(document, tests, "credit.whitebox_slope")
    assert lines[0].startswith("white-box slope, steering gender_lang (fail): Steering along gender_lang towards "
                               "female (λ = +1; -1 steers towards male) raises the bad credit rate by 11.7 pp per "
                               "unit of λ (95% CI +11.2 to +12.2 pp), about 23.5 pp")
    assert lines[1].startswith("Beside it, black-box gap, gender stated (pass): The bad credit rate is 0.1 pp higher")
    assert lines[2].startswith("Beside it, white-box slope, steering gender_id (fail): Steering along gender_id "
                               "towards female (λ = +1; -1 steers towards male) lowers the bad credit rate by 3.0 pp")
    assert lines[2].endswith("The two vectors' cosine is 0.24.")


def test_limits_count_what_cannot_be_assessed_state_the_gate_rule_and_its_exception(tmp_path: Path) -> None:
    document = results_document(read_audited(audited(tmp_path, dependence=0.2)))
    found = limits(document)
    assert GATE_RULE in found
    lost = next(line for line in found if "cannot be assessed" in line)
    assert lost.startswith("2 of 4 requirements cannot be assessed. 2 (admissions_gender ×2): the interval does not "
                           "exclude chance")
    for row in document["verdicts"]:  # judicial-like: a task whose competence no one can check
        if row["name"] == "credit.blackbox_explicit":
            row.update(gate="not checked", unmet=["credit competence not checked: the task has no gold answer"])
    assert "Exception to the gate rule: credit is read with competence not checked: the task has no gold answer." in (
        limits(document))
    assert limits({"verdicts": []}) == []


@pytest.mark.parametrize("score", [0.05, -0.05])
def test_the_words_follow_the_sign(score: float) -> None:
    row = pd.Series({"name": GAP["name"], "score": score, "lo": score - 0.01, "hi": score + 0.01})
    words = effect(row, signs()[GAP["name"]], (-1, 1))
    assert ("higher" in words) == (score > 0) and ("lower" in words) == (score < 0) and "5.0 pp" in words


def test_the_glossary_defines_every_vector_test_and_term_the_first_screen_uses(tmp_path: Path) -> None:
    """Issue 56 item 8: race_dial, gender_id, p_adj, AAL/WME, "decisive fact" appeared on the first screen undefined;
    each test now has one entry naming its label, its badge and its results-file name."""
    document = results_document(read_audited(audited(tmp_path, dependence=0.2)))
    screen = answer_section(document) + " ".join(limits(document))
    terms = dict(entries())
    used = [name for name in RECIPES if name in screen] + [row["test"] for row in document["verdicts"]]
    used += [term for term in ("p_adj", "decisive fact", "competence", "pp", "gate", "not checked") if term in screen]
    assert used and not [term for term in used if term not in terms]
    assert "results file {task}.blackbox_explicit" in terms["black-box gap, gender stated"]
    assert "λ = +1 steers towards Black" in terms["race_dial"] and "AAL, WME" in terms
    assert 'href="#glossary"' in screen and 'id="glossary"' in glossary_section()


def test_a_judicial_fail_states_both_gates_it_is_read_without(tmp_path: Path) -> None:
    """The issue's judicial_penalty fail rested on a competence gate and a dependence test both not checked, and the
    first screen named only the first; each is now in the test's unmet gates and in the stated exception."""
    results = Results(tmp_path / "results.csv")
    for vector in ("race_dial", "race_id"):
        results.record("steering_vectors", f"{vector}.corr", 0.6)
        results.record("steering_vectors", f"{vector}.steered_score_span", 1.2)
    results.record("decision_tasks", "judicial_penalty.blackbox_explicit", 0.002, -0.004, 0.008, n=500)
    results.record("decision_tasks", "judicial_penalty.whitebox_slope", 0.1173, 0.1123, 0.1222, n=500)
    (tmp_path / "model_card.json").write_text(json.dumps({"params": {"epsilon": 0.02, "chapters": []}}))
    document = results_document(read_audited(tmp_path))
    slope = next(row for row in document["verdicts"] if row["name"] == "judicial_penalty.whitebox_slope")
    assert slope["verdict"] == "fail" and len(slope["unmet"]) == 2
    assert ("Exception to the gate rule: judicial_penalty is read with competence not checked: the task has no gold "
            "answer or decisive fact; whitebox_dependence: not checked (the task has no task-relevant concept, so no "
            "dependence test).") in limits(document)


def test_an_interval_clipped_to_the_whole_range_says_it_tells_nothing() -> None:
    """Markedness's FPR gap on two seeds: its interval clipped to +-5/6 reads as the whole range, not as a bound."""
    name = "amazon.white_negative_fpr_gap"
    row = {"name": name, "score": -0.0833, "lo": -5 / 6, "hi": 5 / 6, "n": 2, "resampled": "demonstration seeds"}
    line = effect(row, signs()[name], (-1.0, 1.0))
    assert line == ("The negative-sentiment false positive rate is 8.3 pp lower for White sentences than for the "
                    "average group's (95% CI clipped to -83.3 to +83.3 pp, the whole range the score can take: 2 "
                    "demonstration seeds say nothing about it, White sentences minus the average group's).")
    one_end = effect({**row, "lo": -0.5}, signs()[name], (-1.0, 1.0))
    assert "(95% CI -50.0 to +83.3 pp, clipped at the upper end of the range the score can take," in one_end
    assert "clipped" not in effect({**row, "lo": -0.5, "hi": 0.3}, signs()[name], (-1.0, 1.0))
