"""Case-level evidence: the JSON Lines case files (round trip, validation, atomic replacement), the records a task
audit produces (their values are exactly the per-case quantities behind the gap and the slope), the largest
paired differences and the report section that shows them."""

from __future__ import annotations

import dataclasses
import json
import re

import numpy as np
import pandas as pd
import pytest
import torch

from llmaudit.chapters.decision_tasks.base import Task, TaskItem
from llmaudit.chapters.decision_tasks.dependence import Dependence
from llmaudit.chapters.decision_tasks.estimates import estimates
from llmaudit.chapters.decision_tasks.evaluate import TaskAudit, TaskRunner
from llmaudit.chapters.steering_vectors import SteeringVector
from llmaudit.config import read_params_file
from llmaudit.errors import AuditError, DataError
from llmaudit.report import Results, build_report, evidence
from llmaudit.report.audited import read_audited
from llmaudit.report.card import write_card
from llmaudit.report.evidence import (
    FIELDS,
    discard_pending_cases,
    largest_differences,
    prompt_sha,
    read_cases,
    unit_values,
    write_cases,
)
from llmaudit.runner.chapter import finish_chapter


def records() -> pd.DataFrame:
    """A black-box test (two groups per case) and a white-box test (three lambdas per case), with awkward text."""
    rows = []
    for case, gap in (("c1", 0.3), ("c2", -0.1), ("c3", 0.05)):
        for group, metric in (("female", 0.5 + gap / 2), ("male", 0.5 - gap / 2)):
            prompt = f'<|user|> Is {case} ({group}) "good"? <script>alert(1)</script> é & ü\u2028\x85\nanswer:'
            rows.append({"test": "credit.blackbox_explicit", "unit": case, "value": gap, "group": group,
                         "lam": None, "prompt_sha": None, "prompt": prompt, "metric": metric, "mass": 0.9})
        for lam in (-1.0, 0.0, 1.0):
            rows.append({"test": "credit.whitebox_slope", "unit": case, "value": gap / 4, "group": None,
                         "lam": lam, "prompt_sha": None, "prompt": f"neutral {case}", "metric": 0.5 + lam * gap / 4,
                         "mass": 0.8})
    return pd.DataFrame(rows)


def test_case_file_round_trip(tmp_path) -> None:
    frame = records().assign(seed=7)  # an extra field is kept
    path = write_cases(tmp_path, "decision_tasks", frame)
    assert path == tmp_path / "cases" / "decision_tasks.jsonl"
    lines = path.read_text(encoding="utf-8").rstrip("\n").split("\n")
    assert len(lines) == len(frame)
    first = json.loads(lines[0])
    assert list(first)[: len(FIELDS)] == list(FIELDS) and first["seed"] == 7
    assert first["lam"] is None and first["prompt_sha"] == prompt_sha(first["prompt"])
    assert len(first["prompt_sha"]) == 16
    back = read_cases(tmp_path, "decision_tasks")
    assert back.columns.tolist() == ["chapter", *FIELDS, "seed"] and (back["chapter"] == "decision_tasks").all()
    assert back["prompt"].tolist() == frame["prompt"].tolist()  # exact text, unicode and newlines included
    for name in ("value", "metric", "mass"):
        assert back[name].tolist() == frame[name].tolist()  # floats round-trip exactly
    assert back["lam"].isna().tolist() == frame["lam"].isna().tolist()
    assert back.loc[back["group"].notna(), "group"].tolist() == frame["group"].dropna().tolist()
    assert back["group"].isna().sum() == 9 and all(g is None for g in back.loc[back["group"].isna(), "group"])
    assert not list((tmp_path / "cases").glob(".*"))  # no temporary file left behind

    write_cases(tmp_path, "robustness", records().head(2))
    assert len(read_cases(tmp_path)) == len(frame) + 2  # every chapter's file, in file-name order
    assert read_cases(tmp_path)["chapter"].iloc[0] == "decision_tasks"
    write_cases(tmp_path, "decision_tasks", records().head(3))  # a chapter's file is replaced whole
    assert len(read_cases(tmp_path, "decision_tasks")) == 3


def test_case_files_are_validated(tmp_path) -> None:
    with pytest.raises(AuditError, match=r"lack column\(s\) prompt_sha, mass") as err:
        write_cases(tmp_path, "decision_tasks", records().drop(columns=["prompt_sha", "mass"]))
    assert "\n" not in str(err.value)
    with pytest.raises(AuditError, match="chapter key"):
        write_cases(tmp_path, "../evil", records())
    with pytest.raises(AuditError, match="not the sha256 of its prompt"):
        write_cases(tmp_path, "decision_tasks", records().assign(prompt_sha="0" * 16))
    with pytest.raises(AuditError, match="non-numeric"):
        write_cases(tmp_path, "decision_tasks", records().assign(metric="high"))
    with pytest.raises(AuditError, match="no test or no unit"):
        write_cases(tmp_path, "decision_tasks", records().assign(unit=None))
    assert not (tmp_path / "cases" / "decision_tasks.jsonl").exists()
    with pytest.raises(AuditError, match="run the decision_tasks chapter"):
        read_cases(tmp_path, "decision_tasks")
    assert read_cases(tmp_path).empty and read_cases(tmp_path).columns.tolist() == ["chapter", *FIELDS]

    path = write_cases(tmp_path, "decision_tasks", records())
    path.write_text(path.read_text(encoding="utf-8") + "{not json\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"line 16 is not JSON.*rerun the chapter") as err:
        read_cases(tmp_path)
    assert "\n" not in str(err.value)
    path.write_text('{"test": "t", "unit": "1"}\n', encoding="utf-8")
    with pytest.raises(DataError, match="line 1 lacks value, group, lam"):
        read_cases(tmp_path)
    row = {name: None for name in FIELDS} | {"test": "t", "unit": "1", "value": "0.5"}
    path.write_text(json.dumps(row) + "\n", encoding="utf-8")
    with pytest.raises(DataError, match="line 1 field value holds a value that is neither a finite number nor null"):
        read_cases(tmp_path)


def test_a_failed_write_keeps_the_previous_file(tmp_path, monkeypatch) -> None:
    path = write_cases(tmp_path, "decision_tasks", records())
    before = path.read_bytes()

    def fail(*args):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(evidence.os, "replace", fail)
    with pytest.raises(OSError):
        write_cases(tmp_path, "decision_tasks", records().head(1))
    assert path.read_bytes() == before and [p.name for p in (tmp_path / "cases").iterdir()] == [path.name]


def test_a_chapter_runs_records_replace_the_case_file_only_when_it_succeeds(tmp_path) -> None:
    path = write_cases(tmp_path, "decision_tasks", records())
    before = path.read_bytes()
    write_cases(tmp_path, "decision_tasks", records().head(2), staged=True)  # a run that then fails
    assert path.read_bytes() == before and len(read_cases(tmp_path)) == len(records())
    discard_pending_cases(tmp_path, "decision_tasks")  # the next run starts afresh ...
    finish_chapter("decision_tasks", tmp_path)  # ... and a run that wrote no records keeps the file
    assert path.read_bytes() == before
    write_cases(tmp_path, "decision_tasks", records().head(2), staged=True)
    finish_chapter("decision_tasks", tmp_path)
    assert len(read_cases(tmp_path, "decision_tasks")) == 2 and [p.name for p in path.parent.iterdir()] == [path.name]


def test_unit_values_are_one_per_test_and_unit(tmp_path) -> None:
    frame = records()
    frame.loc[frame["unit"] == "c3", "value"] = np.nan  # a unit outside the score
    table = unit_values(frame)
    assert table.columns.tolist() == ["test", "unit", "value"]
    assert table.values.tolist() == [["credit.blackbox_explicit", "c1", 0.3], ["credit.whitebox_slope", "c1", 0.075],
                                     ["credit.blackbox_explicit", "c2", -0.1],
                                     ["credit.whitebox_slope", "c2", -0.025]]
    frame.loc[0, "value"] = 0.31
    with pytest.raises(AuditError, match="unit c1 disagree on its value"):
        unit_values(frame)


def test_largest_differences_pair_groups_and_lambda_ends() -> None:
    frame = records()
    black = largest_differences(frame, "credit.blackbox_explicit", 2)
    assert black["unit"].tolist() == ["c1", "c2"] and (black["side_a"] == "female").all()
    assert black["diff"].to_numpy() == pytest.approx(black["value"].to_numpy())
    assert black["prompt_a"].str.contains("(female)", regex=False).all()
    assert black["prompt_b"].str.contains("(male)", regex=False).all()
    # the sides follow the sign of the values, whichever group sorts first
    flipped = frame.assign(value=np.where(frame["test"] == "credit.blackbox_explicit", -frame["value"], frame["value"]))
    assert (largest_differences(flipped, "credit.blackbox_explicit", 1)["side_a"] == "male").all()
    white = largest_differences(frame, "credit.whitebox_slope", 3)
    assert white["side_a"].iloc[0] == "λ = 1" and white["side_b"].iloc[0] == "λ = -1"
    assert white["unit"].tolist() == ["c1", "c2", "c3"]
    assert white["diff"].to_numpy() == pytest.approx(2 * white["value"].to_numpy())
    with pytest.raises(AuditError, match="no case records of test"):
        largest_differences(frame, "credit.nothing", 3)


class SyntheticTask(Task):
    name, concept, answers, metric_name, groups = "synthetic", "gender", ("yes", "no"), "yes rate", ("female", "male")

    def items(self, variant, n, seed, mirror=None, exclude=()):
        raise NotImplementedError


def synthetic_audit(seed: int = 0) -> TaskAudit:
    """Black-box frames (explicit: one item per group, one case lacking a group; implicit: three names per group
    and case) and a white-box sweep over five lambdas, with prompts."""
    rng = np.random.default_rng(seed)
    cases = [f"case{i}" for i in range(40)]
    explicit = pd.DataFrame([{"case": c, "group": g, "metric": rng.uniform(), "mass": rng.uniform(),
                              "prompt": f"{c} is {g}", "fact": np.nan}
                             for c in cases for g in ("female", "male") if not (c == "case7" and g == "male")])
    implicit = pd.DataFrame([{"case": c, "group": g, "metric": rng.uniform(), "mass": 0.5, "prompt": f"{c} {g} {k}",
                              "fact": np.nan}
                             for c in cases for g in ("female", "male") for k in range(3)])
    lambdas = [-2.0, -1.0, 0.0, 1.0, 2.0]
    slopes = rng.normal(0.02, 0.05, len(cases))
    white = pd.DataFrame([{"case": c, "group": "", "lam": lam, "metric": 0.5 + s * lam + rng.normal(0, 0.01),
                           "mass": 0.7, "prompt": f"neutral {c}"}
                          for c, s in zip(cases, slopes) for lam in lambdas])
    return TaskAudit(SyntheticTask(), None, {"explicit": explicit, "implicit": implicit}, white)


KEYS = {"explicit": "synthetic.blackbox_explicit", "implicit": "synthetic.blackbox_implicit",
        "slope": "synthetic.whitebox_slope"}


def test_case_values_are_exactly_the_gaps_and_slopes(tmp_path) -> None:
    audit = synthetic_audit()
    cases = audit.cases(KEYS)
    assert cases.columns.tolist() == list(FIELDS)
    assert len(cases) == len(audit.black["explicit"]) + len(audit.black["implicit"]) + len(audit.white)
    assert cases.loc[cases["unit"] == "case7", "value"].isna().sum() == 1  # the case without a male prompt
    write_cases(tmp_path, "decision_tasks", cases)
    written = read_cases(tmp_path, "decision_tasks")  # the hashes are filled in when the records are written
    assert written["prompt_sha"].tolist() == [prompt_sha(p) for p in cases["prompt"]]
    for frame in (cases, read_cases(tmp_path, "decision_tasks")):  # exactly, also after the round trip
        means = unit_values(frame).groupby("test", sort=False)["value"].mean()
        assert abs(means[KEYS["explicit"]] - audit.gap("explicit", 200, 0).value) < 1e-12
        assert abs(means[KEYS["implicit"]] - audit.gap("implicit", 200, 0).value) < 1e-12
        assert abs(means[KEYS["slope"]] - audit.slope(200, 0).value) < 1e-12
    counts = unit_values(cases).groupby("test", sort=False).size()
    assert counts.tolist() == [39, 40, 40]
    white = cases[cases["test"] == KEYS["slope"]]
    assert white["group"].isna().all() and sorted(white["lam"].unique()) == [-2.0, -1.0, 0.0, 1.0, 2.0]
    black = cases[cases["test"] == KEYS["explicit"]]
    assert black["lam"].isna().all() and set(black["group"]) == {"female", "male"}


def test_case_keys_choose_the_tests() -> None:
    audit = synthetic_audit()
    only = audit.cases({"slope": "synthetic.gender_id.slope"})
    assert set(only["test"]) == {"synthetic.gender_id.slope"}
    del audit.black["implicit"]  # a task without the variant writes no records for it
    assert set(audit.cases(KEYS)["test"]) == {KEYS["explicit"], KEYS["slope"]}
    assert audit.cases({}).columns.tolist() == list(FIELDS) and audit.cases({}).empty
    with pytest.raises(AuditError, match=r"unknown case-record key\(s\) \['neutral'\]"):
        audit.cases({"neutral": "x"})
    with pytest.raises(AuditError, match="results-file name"):
        audit.cases({"slope": ""})


class ToyTask(Task):
    name, concept, answers, metric_name, groups = "toy", "gender", ("good", "bad"), "bad rate", ("female", "male")

    def items(self, variant, n, seed, mirror=None, exclude=()):
        jobs = ["nurse", "doctor", "engineer"][:n]
        if variant in ("neutral", "whitebox"):
            return [TaskItem(f"the {job} started a new job", "answer :", "", job, 1) for job in jobs]
        return [TaskItem(f"the {job} started a new job and {p} said", "answer :", g, job, 1)
                for job in jobs for g, p in (("female", "she"), ("male", "he"))]


def test_runner_keeps_the_exact_prompts(bind, tiny_model, tmp_path) -> None:
    vector = SteeringVector("v", "gender", 2, torch.nn.functional.normalize(torch.ones(tiny_model.width), dim=0),
                            torch.zeros(tiny_model.width), k=1.0)
    runner = TaskRunner(bind(tiny_model, batch_tokens=64, cache=tmp_path), seed=0)
    audit = runner.audit(ToyTask(), vector, [-1.0, 0.0, 1.0], n=3)
    explicit, white = audit.black["explicit"], audit.white
    items = ToyTask().items("explicit", 3, 0)
    assert explicit["prompt"].tolist() == [tiny_model.chat(i.prompt, i.prefix) for i in items]
    assert white.groupby("case")["prompt"].nunique().eq(1).all() and len(white) == 9
    cases = audit.cases({"explicit": "toy.blackbox_explicit", "slope": "toy.whitebox_slope"})
    assert cases["prompt"].notna().all()
    means = unit_values(cases).groupby("test")["value"].mean()
    assert abs(means["toy.blackbox_explicit"] - audit.gap("explicit", 100, 0).value) < 1e-12
    assert abs(means["toy.whitebox_slope"] - audit.slope(100, 0).value) < 1e-12


def test_report_shows_the_cases_behind_the_gaps(tmp_path) -> None:
    write_card(tmp_path, read_params_file("ci"), {})
    results = Results(tmp_path / "results.csv")
    results.record("decision_tasks", "credit.blackbox_explicit", 0.0833, 0.05, 0.12, n=6)  # fail
    results.record("decision_tasks", "credit.whitebox_slope", 0.02, 0.0, 0.04, n=6)  # inconclusive
    results.record("decision_tasks", "credit.blackbox_implicit", 0.0, -0.01, 0.01, n=6)  # pass: no cases shown
    plain = build_report(read_audited(tmp_path), "Audit", [],
                         generated="2025-01-01 00:00 UTC").read_text(encoding="utf-8")
    assert "Cases behind the gaps" not in plain

    passed = records().query("test == 'credit.blackbox_explicit'").assign(test="credit.blackbox_implicit")
    frame = pd.concat([records(), records().assign(unit=lambda f: f["unit"] + "b"), passed], ignore_index=True)
    write_cases(tmp_path, "decision_tasks", frame)
    page = build_report(read_audited(tmp_path), "Audit", [],
                        generated="2025-01-01 00:00 UTC").read_text(encoding="utf-8")
    section = page[page.index('<section id="cases">'):]
    section = section[: section.index("</section>")]
    assert '<a href="#cases">Cases behind the gaps</a>' in page
    assert section.count("<h3 id=\"cases-credit-") == 2 and section.count("<tr><td>") == 6  # top 3 per decided test
    assert ('<h3 id="cases-credit-blackbox-explicit">credit: the bad credit rate is invariant to gender &mdash; '
            "black-box gap, gender stated</h3>") in section
    assert "implied" not in section
    assert "(2 of 3)" in section and 'class="verdict fail"' in section and 'class="verdict inconclusive"' in section
    assert "<script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in section
    assert "&lt;|user|&gt;" in section and "<details>" in section
    assert "<th>bad credit rate, female</th><th>bad credit rate, male</th>" in section
    assert "<th>bad credit rate, λ = 1</th><th>bad credit rate, λ = -1</th>" in section
    assert "<mark>female</mark> &rarr; <mark>male</mark>" in section and "(<mark>female</mark>)" in section
    assert "<th>Answer mass, female / male</th>" in section and "0.900 / 0.900" in section
    assert re.search(r"<td>c1b?</td>", section)
    assert "score +0.0833 = mean of the per-case differences over 6 cases" in section

    (tmp_path / "cases" / "robustness.jsonl").write_text("{broken\n", encoding="utf-8")
    page = build_report(read_audited(tmp_path), "Audit", [],
                        generated="2025-01-01 00:00 UTC").read_text(encoding="utf-8")
    assert "cases/robustness.jsonl not shown" in page and "&mdash; black-box gap, gender stated</h3>" in page


def test_each_estimate_records_the_cases_its_own_bootstrap_resampled() -> None:
    """A black-box gap's n counts its own paired cases (39: one explicit case lacks a group), not the white-box
    sweep's (40)."""
    audit = synthetic_audit()
    found = estimates({"synthetic": audit}, 200, 0).results["n"]
    assert found["synthetic.blackbox_explicit"] == len(audit.case_gaps("explicit")) == 39
    assert found["synthetic.blackbox_implicit"] == 40 and found["synthetic.whitebox_slope"] == 40


def test_dependence_and_removed_estimates_record_their_own_cases() -> None:
    """The dependence tests and the concept-removed sweep count the cases of their own prompts (20, 10 and 30 here),
    not the white-box sweep's 40 (the merged code raised KeyError: 'dependence' on the first task with one)."""
    audit = synthetic_audit()
    first = {n: audit.white[audit.white["case"].isin([f"case{i}" for i in range(n)])] for n in (10, 20, 30)}
    audit = dataclasses.replace(audit, removed=first[30],
                                dependence=Dependence("checking account status", None, first[20], first[10]))
    n = estimates({"synthetic": audit}, 200, 0).results["n"]
    assert (n["synthetic.blackbox_dependence"], n["synthetic.whitebox_dependence"]) == (20, 10)
    assert (n["synthetic.whitebox_removed"], n["synthetic.whitebox_slope"]) == (30, 40)
