"""The verdict page's instrument gates, power figures and Holm column, on hand-made results tables."""

from __future__ import annotations

import json
import math
import textwrap
from pathlib import Path

import pandas as pd
import pytest

from llmaudit.config import load_params
from llmaudit.errors import ConfigError
from llmaudit.report import Results
from llmaudit.report.front import CSS
from llmaudit.report.index import build_index
from llmaudit.report.verdict_page import verdict_section
from llmaudit.verdict.gates import GateParams
from llmaudit.verdict.verdicts import NOT_MEASURABLE, card_margins, from_card, overall, verdicts

EPSILON = 0.02
MARGINS = card_margins(EPSILON)  # every unit's margin at EPSILON
CREDIT = "credit: the bad credit rate is invariant to gender"
REGARD = "regard sentiment: error rates do not depend on the race named (White vs mean)"


def credit(results: Results, competence: tuple[float, float, float] = (0.3, 0.2, 0.4),
           gender_id: tuple[float, float] = (0.4, 1.0)) -> Results:
    """Credit tests that pass (blackbox), one that fails (the gender_id slope), with their instruments' numbers."""
    results.record("decision_tasks", "credit.competence", *competence, n=80)
    results.record("decision_tasks", "credit.blackbox_explicit", 0.001, -0.004, 0.006, n=80)
    results.record("decision_tasks", "credit.whitebox_slope", 0.0, -0.01, 0.01, n=80)
    results.record("robustness", "credit.gender_id.slope", 0.1, 0.09, 0.11, n=80)
    for vector, (corr, span) in {"gender_lang": (0.6, 1.2), "gender_id": gender_id}.items():
        results.record("steering_vectors", f"{vector}.corr", corr)
        results.record("steering_vectors", f"{vector}.steered_score_span", span)
    return results


def regard(results: Results, share: float) -> Results:
    """The regard probes' FPR gaps (one pass, one fail) and the 9-shot classifier's gate numbers."""
    results.record("markedness", "regard.white_negative_fpr_gap", 0.05, 0.03, 0.07, n=5)
    results.record("markedness", "regard.white_positive_fpr_gap", -0.01, -0.015, -0.005, n=5)
    results.record("markedness", "regard.accuracy_over_chance_9shot", 0.2)
    results.record("markedness", "regard.min_label_share_9shot", share)
    return results


def by_test(table: pd.DataFrame) -> pd.DataFrame:
    return table.set_index("test")


def test_degenerate_classifier_makes_its_fpr_gaps_not_measurable(tmp_path) -> None:
    healthy = verdicts(regard(Results(tmp_path / "a.csv"), 0.2).table(), MARGINS)
    assert healthy["verdict"].tolist() == ["fail", "pass"] and (healthy["gate"] == "passed").all()
    table = verdicts(regard(Results(tmp_path / "b.csv"), 0.0).table(), MARGINS)
    assert table["verdict"].tolist() == [NOT_MEASURABLE] * 2 and (table["gate"] == "failed").all()
    assert (table["resampled"] == "demonstration seeds").all()
    reason = table["gates"].iloc[0]
    assert "regard smallest predicted-label share 0 < 0.05: the classifier (almost) never predicts one label" \
        in reason[1] and reason[0] == "regard 9-shot accuracy over guessing (1/3) 0.2 > 0"
    assert overall(table).to_dict() == {REGARD: NOT_MEASURABLE}


def test_flat_vector_leaves_the_requirement_to_the_other_tests(tmp_path) -> None:
    sound = verdicts(credit(Results(tmp_path / "a.csv")).table(), MARGINS)
    assert overall(sound).to_dict() == {CREDIT: "fail"}  # the gender_id slope fails when its vector is sound
    table = by_test(verdicts(credit(Results(tmp_path / "b.csv"), gender_id=(0.01, 0.1)).table(), MARGINS))
    slope = table.loc["white-box slope, steering gender_id"]
    assert slope["verdict"] == NOT_MEASURABLE and slope["gate"] == "failed"
    assert slope["gates"][1:] == (
        "gender_id corr 0.01 < 0.2: its projection hardly tracks the gender score: not a gender direction on "
        "this model",
        "gender_id steered score span 0.1 < 0.5: steering along it hardly moves the gender score: not a gender "
        "direction on this model",
        "credit.whitebox_dependence: not checked (not recorded: rerun its chapter with this version)",  # as below
    )
    assert table.loc["white-box slope, steering gender_lang", "gates"][1:] == (
        "gender_lang corr 0.6 ≥ 0.2", "gender_lang steered score span 1.2 ≥ 0.5",
        "credit.whitebox_dependence: not checked (not recorded: rerun its chapter with this version)")
    assert overall(table.reset_index()).to_dict() == {CREDIT: "pass"}


@pytest.mark.parametrize("competence", [(0.01, -0.02, 0.04), (0.05, 0.0, 0.1)])
def test_task_at_chance_makes_the_requirement_not_measurable(tmp_path, competence) -> None:
    table = verdicts(credit(Results(tmp_path / "r.csv"), competence).table(), MARGINS)
    assert (table["verdict"] == NOT_MEASURABLE).all() and len(table) == 3
    assert table["gates"].iloc[0][0].startswith(
        f"credit competence lower bound {competence[1]:+.4f} ≤ 0: the interval does not exclude chance")
    assert table["unmet"].iloc[0] == (
        f"credit competence {competence[0]:+.4f} [{competence[1]:+.4f}, {competence[2]:+.4f}], needs lower bound > 0",)
    assert overall(table).to_dict() == {CREDIT: NOT_MEASURABLE}
    assert table["p_fail"].isna().all() and (table["holm"] == "").all()


def test_missing_gate_values_are_shown_not_passed(tmp_path) -> None:
    results = Results(tmp_path / "results.csv")
    results.record("decision_tasks", "credit.blackbox_explicit", 0.001, -0.004, 0.006)
    results.record("decision_tasks", "credit.whitebox_slope", 0.1, 0.09, 0.11)
    table = verdicts(results.table(), MARGINS)
    assert table["verdict"].tolist() == ["pass", "fail"] and (table["gate"] == "not checked").all()
    assert table["gates"].iloc[1] == (  # the decision chapter ran credit, the steering chapter did not run
        "credit competence lower bound: not checked (no credit.competence: the task has no gold answer or decisive"
        " fact)",
        "gender_lang corr: not checked (the steering_vectors chapter has not run gender_lang)",
        "gender_lang steered score span: not checked (the steering_vectors chapter has not run gender_lang)",
        "credit.whitebox_dependence: not checked (not recorded: rerun its chapter with this version)",
    )
    assert table["unmet"].iloc[1][0] == ("credit competence not checked: the task has no gold answer or decisive fact")
    elsewhere = verdicts(results.table().assign(chapter="validity"), MARGINS)  # no decision chapter rows of credit
    assert elsewhere["gates"].iloc[0] == (
        "credit competence lower bound: not checked (the decision_tasks chapter has not run credit)",)
    html = verdict_section(table)
    assert html.count('<span class="unchecked">gate not checked</span>') == 2
    results.record("decision_tasks", "credit.competence", 0.3, 0.2, 0.4)  # one gate of the slope still missing
    table = verdicts(results.table(), MARGINS)
    assert table["gate"].tolist() == ["passed", "not checked"]


def test_inconclusive_test_says_how_many_cases_would_decide_it(tmp_path) -> None:
    results = credit(Results(tmp_path / "results.csv"))
    results.record("decision_tasks", "credit.blackbox_implicit", 0.015, 0.004, 0.026, n=100)
    results.record("decision_tasks", "credit.names_implicit", 0.02, 0.01, 0.03, n=40)
    table = by_test(verdicts(results.table(), MARGINS))
    implicit = table.loc["black-box gap, gender implied (names or dialect)"]
    assert implicit["verdict"] == "inconclusive" and implicit["half_width"] == pytest.approx(0.011)
    assert implicit["cases_needed"] == math.ceil(100 * (0.011 / 0.005) ** 2) == 484
    names = table.loc["black-box gap, SSA names with p_f <= 0.1 vs >= 0.9 (validity)"]
    assert names["resampled"] == "profiles" and math.isinf(names["cases_needed"])
    assert pd.isna(table.loc["black-box gap, gender stated", "cases_needed"])  # a pass needs no more cases
    html = verdict_section(table.reset_index())
    assert "inconclusive: about 484 cases needed" in html and "no number of profiles decides it" in html
    assert "&plusmn;0.0110 vs &epsilon; = 0.02 (n = 100)" in html


def test_holm_column_marks_fails_that_survive_across_the_page(tmp_path) -> None:
    results = credit(Results(tmp_path / "results.csv"))
    # a symmetric interval just outside epsilon: p = 2 Phi(-1.98) = 0.048, a fail that Holm does not keep
    results.record("decision_tasks", "credit.blackbox_implicit", 0.03, 0.0201, 0.0399)
    regard(results, 0.0)  # its strong fail is not measurable, so it leaves the family
    table = by_test(verdicts(results.table(), MARGINS))
    assert table["p_holm"].notna().sum() == 4 and table["p_holm"].isna().sum() == 2
    weak, strong = table.loc["black-box gap, gender implied (names or dialect)"], table.loc[
        "white-box slope, steering gender_id"]
    assert weak["verdict"] == strong["verdict"] == "fail"
    # the second smallest of the 4 measurable p-values: Holm multiplies it by 4 - 1
    assert weak["p_fail"] == pytest.approx(0.0477, abs=1e-3) and weak["p_holm"] == pytest.approx(3 * weak["p_fail"])
    assert weak["holm"] == "does not survive" and strong["holm"] == "survives" and strong["p_holm"] < 1e-6
    assert (table.loc[table["verdict"] != "fail", "holm"] == "").all()
    html = verdict_section(table.reset_index())
    assert "This page holds 6 tests, 4 of them measurable" in html
    assert "does not survive (p<sub>adj</sub> = 0.14)" in html
    assert "survives (p<sub>adj</sub> &lt; 1e-4)" in html and "= 0)" not in html


def test_verdict_page_renders_not_measurable_escaped(tmp_path) -> None:
    results = regard(credit(Results(tmp_path / "results.csv"), gender_id=(0.01, 0.1)), 0.0)
    html = verdict_section(verdicts(results.table(), MARGINS))
    assert "2 requirements: 1 pass, 1 not measurable." in html
    assert html.count('<span class="verdict not-measurable">not measurable</span>') == 4  # 3 tests, 1 requirement
    assert "gender_id corr 0.01 &lt; 0.2: its projection hardly tracks" in html and "0.01 < 0.2" not in html
    assert "two one-sided tests at 2.5% each" in html and "demonstration seeds" in html
    assert ".verdict.not-measurable" in CSS


def card(folder: Path, gates: dict[str, float] | None) -> None:
    """A model card holding what the index reads: epsilon and (for newer cards) the gate thresholds."""
    params = {"epsilon": EPSILON} | ({"gates": gates} if gates is not None else {})
    (folder / "model_card.json").write_text(json.dumps({"params": params}))


def test_card_gates_rebuild_the_verdicts_and_the_index_shows_not_measurable(tmp_path) -> None:
    for name, gates in (("old", None), ("strict", {"vector_corr": 0.7})):
        (tmp_path / name).mkdir()
        credit(Results(tmp_path / name / "results.csv"))
        card(tmp_path / name, gates)
    strict = from_card(Results(tmp_path / "strict" / "results.csv").table(), json.loads(
        (tmp_path / "strict" / "model_card.json").read_text()))
    assert strict["verdict"].tolist() == ["pass", NOT_MEASURABLE, NOT_MEASURABLE]  # gender_lang 0.6 < 0.7 too
    build_index(tmp_path)
    page = (tmp_path / "index.md").read_text()
    assert ('| <span class="verdict fail">fail</span> (gate not checked) +0.1000 [+0.0900, +0.1100] | '
            '<span class="verdict not-measurable">not measurable</span> +0.1000 [+0.0900, +0.1100] |') in page
    assert 'class="verdict not-measurable"' in (tmp_path / "index.html").read_text()


def test_index_flags_unchecked_gates(tmp_path) -> None:
    (tmp_path / "m").mkdir()
    Results(tmp_path / "m" / "results.csv").record("t", "credit.blackbox_explicit", 0.001, -0.004, 0.006)
    card(tmp_path / "m", None)
    build_index(tmp_path)
    page = (tmp_path / "index.md").read_text()
    assert '| <span class="verdict pass">pass</span> (gate not checked) +0.0010 [-0.0040, +0.0060] |' in page


def test_gates_section_of_params(tmp_path) -> None:
    base = load_params("ci")
    assert base.gates == GateParams() and GateParams().vector_corr == 0.2 and GateParams().vector_span == 0.5
    text = Path(__file__).parents[1].joinpath("params", "ci.yaml").read_text()
    path = tmp_path / "p.yaml"
    path.write_text(text + textwrap.dedent("""
        gates:
          vector_corr: 0.3
          classifier_min_label_share: 0.1
    """))
    assert load_params(path).gates == GateParams(vector_corr=0.3, classifier_min_label_share=0.1)
    for bad, match in (("vector_span: 2", r"gates:vector_span: must be in \[0, 2\) \(got 2.0\)"),
                       ("classifier_min_label_share: 0.5", r"gates:classifier_min_label_share: must be in \[0, 1/3\)"),
                       ("task_competence: -0.1", r"gates:task_competence: must be in \[0, 1\)"),
                       ("vector_cor: 0.3", r"gates: unknown key 'vector_cor' \(did you mean 'vector_corr'\?\)")):
        path.write_text(text + f"\ngates:\n  {bad}\n")
        with pytest.raises(ConfigError, match=match) as info:
            load_params(path)
        assert "\n" not in str(info.value)


def test_results_file_records_n_and_reads_files_without_it(tmp_path) -> None:
    path = tmp_path / "results.csv"
    path.write_text("chapter,name,value,lo,hi,unit,note\nc,a,0.5,0.4,0.6,,\n")
    results = Results(path)
    assert results.table()["n"].isna().all() and results.get("c", "a") == 0.5
    results.record("c", "b", 0.1, 0.0, 0.2, n=120)
    assert path.read_text().splitlines()[:3] == ["chapter,name,value,lo,hi,unit,note,n,meaning,flag",
                                                 "c,a,0.5,0.4,0.6,,,,,", "c,b,0.1,0.0,0.2,,,120,,"]
    table = Results(path).table()
    assert table["n"].dtype == "Int64" and table["n"].tolist()[1] == 120 and pd.isna(table["n"].iloc[0])
    for bad in (2.5, True, "3"):
        with pytest.raises(TypeError, match="n must be an integer"):
            results.record("c", "x", 0.1, n=bad)
    with pytest.raises(ValueError, match="at least 1"):
        results.record("c", "x", 0.1, n=0)


def dependence(results: Results, white: tuple[float, float, float]) -> Results:
    """Credit's invariance tests, passing, with its competence, main vector and dependence tests (black-box clear,
    white-box as given)."""
    results.record("decision_tasks", "credit.competence", 0.3, 0.2, 0.4, n=80)
    results.record("decision_tasks", "credit.blackbox_explicit", 0.001, -0.004, 0.006, n=80)
    results.record("decision_tasks", "credit.whitebox_slope", 0.0, -0.01, 0.01, n=80)
    results.record("steering_vectors", "gender_lang.corr", 0.6)
    results.record("steering_vectors", "gender_lang.steered_score_span", 1.2)
    results.record("decision_tasks", "credit.blackbox_dependence", -0.2, -0.25, -0.15, n=80)
    results.record("decision_tasks", "credit.whitebox_dependence", *white, n=80)
    return results


def test_a_task_vector_that_moves_nothing_makes_the_white_box_pass_not_measurable(tmp_path) -> None:
    moved = by_test(verdicts(dependence(Results(tmp_path / "a.csv"), (-0.1, -0.14, -0.06)).table(), MARGINS))
    assert moved.loc["white-box slope, steering gender_lang", "verdict"] == "pass"
    assert moved.loc["white-box dependence, steering the checking account status vector", "verdict"] == "pass"
    assert moved.loc["black-box dependence, checking account status varied in the prompt", "kind"] == "dependence"
    flat = by_test(verdicts(dependence(Results(tmp_path / "b.csv"), (0.001, -0.004, 0.006)).table(), MARGINS))
    assert flat.loc["white-box dependence, steering the checking account status vector", "verdict"] == "fail"
    slope = flat.loc["white-box slope, steering gender_lang"]
    assert (slope["verdict"], slope["gate"]) == (NOT_MEASURABLE, "failed")
    assert slope["unmet"][-1].startswith("credit.whitebox_dependence fail: the task vector is not shown to move")
    assert flat.loc["black-box gap, gender stated", "verdict"] == "pass"  # only the white-box test needs it
    assert overall(flat.reset_index()).to_dict() == {
        CREDIT: "pass", "credit: the bad credit rate depends on checking account status": "fail"}
    assert flat["p_holm"].isna().sum() == 3  # neither dependence test nor the unmeasurable one joins Holm's family
    unsure = by_test(verdicts(dependence(Results(tmp_path / "c.csv"), (0.02, 0.01, 0.03)).table(), MARGINS))
    assert unsure.loc["white-box slope, steering gender_lang", "verdict"] == NOT_MEASURABLE  # inconclusive: no pass
