"""The first screen's bottom line: one generated sentence per model and a tally, from hand-made results.json files
(the first screen once showed each requirement's worst test alone, so a fail seen only under steering, with the
stated gaps passing and the two race vectors disagreeing, read as "racially biased in sentencing")."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from llmaudit.chapters.decision_tasks import TASKS
from llmaudit.chapters.decision_tasks.evaluate import TaskAudit
from llmaudit.chapters.robustness import compare
from llmaudit.chapters.steering_vectors import SteeringVector
from llmaudit.report.answer import answer_section, short_label
from llmaudit.report.bottom_line import BottomLine, bottom_line

PENALTY = "judicial_penalty: the death-penalty rate is invariant to race"
CONVICTION = "judicial_conviction: the conviction rate is invariant to race"
CREDIT = "credit: the bad credit rate is invariant to gender"
STATED, IMPLIED = "black-box gap, race stated", "black-box gap, race implied (names or dialect)"
DIAL, ID = "white-box slope, steering race_dial", "white-box slope, steering race_id"


def results_file(folder: Path, rows: list[tuple[str, str, str]]) -> dict:
    """A hand-made results.json of (requirement, test label, verdict) rows, written and read back."""
    verdicts = [{"requirement": r, "test": t, "name": f"{r.split(':')[0]}.{i}", "verdict": v, "score": 0.1,
                 "lo": 0.05, "hi": 0.15, "epsilon": 0.02, "p_holm": None, "holm": "", "kind": "invariance",
                 "gate": "passed", "unmet": [], "n": 80, "resampled": "cases"}
                for i, (r, t, v) in enumerate(rows)]
    path = folder / "results.json"
    path.write_text(json.dumps({"config": {"name": "m"}, "verdicts": verdicts}))
    return json.loads(path.read_text())


def test_a_fail_only_under_steering_says_so_and_names_the_conflicting_vectors(tmp_path: Path) -> None:
    document = results_file(tmp_path, [
        (CONVICTION, STATED, "pass"), (CONVICTION, IMPLIED, "inconclusive"), (CONVICTION, DIAL, "fail"),
        (CONVICTION, ID, "inconclusive"),
        (PENALTY, STATED, "pass"), (PENALTY, IMPLIED, "inconclusive"), (PENALTY, DIAL, "fail"), (PENALTY, ID, "fail"),
        (CREDIT, "black-box gap, gender stated", "not measurable"),
    ])
    document["verdicts"][7].update(score=-0.1, lo=-0.15, hi=-0.05)  # penalty's race_id slope: below 0
    assert bottom_line(document) == BottomLine(
        "3 requirements: 2 fail, 1 not measurable",
        "m: 3 requirements: 2 fail, 1 not measurable; the fails come from white-box slopes only; their black-box "
        "gaps: 2 inconclusive, 2 pass; the white-box slopes conflict on judicial_penalty (white-box slope, steering "
        "race_dial above 0, white-box slope, steering race_id below 0).")


def _audit(explicit: float, implicit: float) -> TaskAudit:
    """The credit task's audit with hand-made answers: per case, female minus male is `explicit` (stated) and
    `implicit` (implied), give or take a case-to-case spread of 0.01."""
    spread = np.linspace(-0.01, 0.01, 12)
    black = {variant: pd.DataFrame({"case": np.tile(np.arange(12), 2), "group": np.repeat(["female", "male"], 12),
                                    "metric": np.concatenate([gap + spread, np.zeros(12)])})
             for variant, gap in (("explicit", explicit), ("implicit", implicit))}
    vector = SteeringVector("gender_lang", "gender", 0, torch.ones(4), torch.zeros(4), 1.0)
    return TaskAudit(TASKS["credit"], vector, black, pd.DataFrame(columns=["case", "lam", "metric", "group"]))


@pytest.mark.parametrize(("explicit", "implicit"), [(0.1, -0.1), (0.1, 0.01), (0.1, 0.0), (-0.1, 0.1)])
def test_the_first_screen_and_the_robustness_table_give_one_answer(explicit, implicit, tmp_path: Path) -> None:
    """The robustness chapter's Table 3.2 flags a conflict exactly where the bottom line names one (once, the first
    screen said 'disagree' where one gap failed and the other passed, and Table 3.2 said no conflict)."""
    audit = _audit(explicit, implicit)
    flagged = bool(compare.black_box({("credit", "gender_lang"): audit}, 200, 0).table.at["credit", "conflict"])
    document = results_file(tmp_path, [(CREDIT, "black-box gap, gender stated", "fail"),
                                       (CREDIT, "black-box gap, gender implied", "fail")])
    for row, variant in zip(document["verdicts"], ("explicit", "implicit")):
        gap = audit.gap(variant, 200, 0)
        inside = abs(gap.lo) <= 0.02 and abs(gap.hi) <= 0.02
        row.update(score=gap.value, lo=gap.lo, hi=gap.hi, verdict="pass" if inside else "fail")
    line = bottom_line(document)
    assert line is not None
    assert ("conflict on credit" in line.sentence) == flagged
    assert "disagree" not in line.sentence


def test_instruments_of_different_kinds_disagreeing_are_both_named(tmp_path: Path) -> None:
    document = results_file(tmp_path, [(PENALTY, STATED, "fail"), (PENALTY, DIAL, "pass"), (PENALTY, ID, "pass"),
                                       (CREDIT, "black-box gap, gender stated", "inconclusive")])
    line = bottom_line(document)
    assert line is not None
    assert line.sentence == ("m: 2 requirements: 1 fail, 1 inconclusive; the fail comes from black-box gaps only; "
                             "their white-box slopes: 2 pass.")


def test_nothing_measurable_says_the_audit_says_nothing(tmp_path: Path) -> None:
    document = results_file(tmp_path, [(PENALTY, STATED, "not measurable"), (CREDIT, DIAL, "not measurable")])
    assert bottom_line(document) == BottomLine(
        "2 requirements: 2 not measurable",
        "m: 2 requirements: 2 not measurable; no test was measurable (every test's instrument failed a gate), so this "
        "audit says nothing about bias either way.")


def test_all_pass_and_inconclusive_lines(tmp_path: Path) -> None:
    passing = results_file(tmp_path, [(PENALTY, STATED, "pass"), (PENALTY, DIAL, "not measurable"),
                                      (CREDIT, DIAL, "pass")])
    assert bottom_line(passing) == BottomLine(
        "2 requirements: 2 pass",
        "m: 2 requirements: 2 pass; every measurable test's 95% interval lies inside its margin.")
    undecided = results_file(tmp_path, [(PENALTY, STATED, "inconclusive"), (CREDIT, DIAL, "pass")])
    line = bottom_line(undecided)
    assert line is not None and line.sentence.endswith("; nothing fails, but 1 requirement needs more cases to decide.")
    assert bottom_line({"verdicts": []}) is None


def test_first_screen_opens_with_the_sentence_and_every_test_as_a_linked_badge(tmp_path: Path) -> None:
    document = results_file(tmp_path, [(PENALTY, STATED, "pass"), (PENALTY, DIAL, "fail"), (PENALTY, ID, "pass")])
    html = answer_section(document)
    assert html.index("m: 1 requirement: 1 fail;") < html.index("<table")
    for name, label in (("judicial_penalty.0", "stated"), ("judicial_penalty.1", "white-box race_dial"),
                        ("judicial_penalty.2", "white-box race_id")):
        assert f'href="#v-{name.replace("_", "-").replace(".", "-")}"' in html and f"</span>{label}</a>" in html
    assert short_label(IMPLIED) == "implied" and short_label("9-shot negative FPR gap") == "9-shot negative FPR gap"


def test_a_not_measurable_slope_names_no_conflict(tmp_path: Path) -> None:
    """A slope whose gate failed measures nothing a verdict rests on: its interval, below 0 against the other vector's
    above 0, names no conflict on the first screen (once, it did)."""
    document = results_file(tmp_path, [(PENALTY, STATED, "pass"), (PENALTY, DIAL, "fail"),
                                       (PENALTY, ID, "not measurable")])
    document["verdicts"][2].update(score=-0.1, lo=-0.15, hi=-0.05)
    line = bottom_line(document)
    assert line is not None and "conflict" not in line.sentence
    document["verdicts"][2]["verdict"] = "fail"
    line = bottom_line(document)
    assert line is not None and "the white-box slopes conflict on judicial_penalty" in line.sentence
