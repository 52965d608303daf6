"""results.json: the same numbers as results.csv (round trip), the verdicts and the configuration, in the shape of
lm-evaluation-harness's results file where it fits."""

from __future__ import annotations

import json

import pandas as pd

from llmaudit.report import Results
from llmaudit.report.audited import read_audited
from llmaudit.report.results import COLUMNS
from llmaudit.report.results_json import write_results_json


def test_results_json_round_trips_to_the_csv_and_carries_verdicts(tmp_path) -> None:
    results = Results(tmp_path / "results.csv")
    results.record("steering_vectors", "gender_lang.corr", 0.6)
    results.record("steering_vectors", "gender_lang.steered_score_span", 1.2)
    results.record("steering_vectors", "gender_lang.block", 25, note="chosen block")
    results.record("decision_tasks", "credit.competence", 0.3, 0.2, 0.4, n=48)
    results.record("decision_tasks", "credit.whitebox_slope", 0.1, 0.09, 0.11, unit="per unit lambda", n=48)
    results.record("decision_tasks", "credit.verdict", "fail", note="|S| <= 0.02")
    results.record("robustness", "credit.whitebox_conflict", True, unit="yes/no", meaning="opposite signs")
    card = {"params": {"name": "m", "file": "m.yaml", "sha256": "ab", "text": "name: m\n", "seed": 0, "epsilon": 0.02},
            "environment": {"llmaudit": "0.1.0", "code_version": "c0de"}, "model": {"sha256": "f00"}}
    (tmp_path / "model_card.json").write_text(json.dumps(card))

    document = json.loads(write_results_json(read_audited(tmp_path)).read_text())
    def plain(x):
        return None if x is None or x is pd.NA or (isinstance(x, float) and x != x) else x

    back = [(c, n, *(e[f] for f in ("value", "lo", "hi", "unit", "note", "n", "meaning", "flag")))
            for c, entries in document["results"].items() for n, e in entries.items()]
    table = Results(tmp_path / "results.csv").table()
    assert back == [tuple(plain(x) for x in row) for row in table[COLUMNS].itertuples(index=False)]
    assert document["results"]["robustness"]["credit.whitebox_conflict"]["flag"] is True
    assert document["results"]["robustness"]["credit.whitebox_conflict"]["value"] is None
    assert document["n-samples"] == {"decision_tasks": {"credit.competence": 48, "credit.whitebox_slope": 48}}
    (verdict,) = document["verdicts"]
    assert (verdict["test"], verdict["verdict"], verdict["n"]) == ("white-box slope, steering gender_lang", "fail", 48)
    assert document["config"]["epsilon"] == 0.02 and document["versions"]["code_version"] == "c0de"


def test_every_task_and_template_module_has_a_version(tmp_path) -> None:
    """As lm-evaluation-harness's results carry a version per task: each chapter, each of its modules (the templates
    and prompt builders) and each decision task has one; the two judicial tasks share a module but not a version
    (their answer words differ), and a version is the same on every writing of the same code."""
    from llmaudit.chapters.decision_tasks import TASKS
    from llmaudit.registry import KEYS
    from llmaudit.report.versions import DIGITS, task_versions

    Results(tmp_path / "results.csv").record("decision_tasks", "credit.competence", 0.3, 0.2, 0.4, n=48)
    document = json.loads(write_results_json(read_audited(tmp_path)).read_text())
    versions = document["task_versions"]
    assert list(versions) == list(KEYS)
    assert "prompts" in versions["markedness"]["modules"] and "stimuli" in versions["framing"]["modules"]
    tasks = versions["decision_tasks"]["tasks"]
    assert list(tasks) == list(TASKS) and all(len(v) == DIGITS for v in tasks.values())
    assert tasks["judicial_conviction"] != tasks["judicial_penalty"]
    assert task_versions() == versions
