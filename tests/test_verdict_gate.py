"""`llmaudit verdict REPORT_DIR`: the verdict table on the terminal, the exit status CI branches on (0 every
requirement passes, 1 some fails, 3 none fails but some is undecided), and JUnit XML with one case per test."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from llmaudit.cli import main
from llmaudit.report import Results

GOOD_INSTRUMENTS = {"credit.competence": (0.3, 0.2, 0.4), "gender_lang.corr": (0.6,),
                    "gender_lang.steered_score_span": (1.2,)}


def report(tmp_path: Path, slope: tuple[float, float, float], corr: float = 0.6) -> Path:
    """A report folder with the credit requirement's black-box gap (a pass) and white-box slope `slope`."""
    folder = tmp_path / "model-a"
    results = Results(folder / "results.csv")
    for name, numbers in {**GOOD_INSTRUMENTS, "gender_lang.corr": (corr,)}.items():
        results.record("steering_vectors", name, *numbers)
    results.record("decision_tasks", "credit.blackbox_explicit", 0.001, -0.004, 0.006, n=48)
    results.record("decision_tasks", "credit.whitebox_slope", *slope, n=48)
    (folder / "model_card.json").write_text(json.dumps({"params": {"epsilon": 0.02}}))
    return folder


@pytest.mark.parametrize(
    "slope, corr, status, outcome",
    [
        ((0.0, -0.01, 0.01), 0.6, 0, "pass"),
        ((0.1, 0.09, 0.11), 0.6, 1, "fail"),
        ((0.015, 0.0, 0.03), 0.6, 3, "inconclusive"),
        ((0.1, 0.09, 0.11), 0.05, 0, "not measurable"),  # the failing slope's vector fails its gate; the gap passes
    ],
)
def test_exit_status_and_junit_follow_the_verdicts(tmp_path, capsys, slope, corr, status, outcome) -> None:
    junit = tmp_path / "verdicts.xml"
    assert main(["verdict", str(report(tmp_path, slope, corr)), "--junit", str(junit)]) == status
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].split()[0] == ("pass" if status == 0 else outcome)
    assert printed[2].strip().startswith(outcome)  # the white-box slope's own line
    cases = ET.parse(junit).getroot().findall("./testsuite/testcase")
    assert [c.get("name") for c in cases] == ["black-box gap, gender stated", "white-box slope, steering gender_lang"]
    slope_case = cases[1]
    assert (slope_case.find("failure") is not None) == (outcome == "fail")
    assert (slope_case.find("skipped") is not None) == (outcome in ("inconclusive", "not measurable"))
    if outcome == "not measurable":
        assert "gender_lang corr 0.05 < 0.2" in slope_case.find("skipped").get("message")


def test_a_folder_without_an_audit_is_one_line(tmp_path, capsys) -> None:
    assert main(["verdict", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "results.csv not found" in err[0]
