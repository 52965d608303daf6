"""The whole audit of a model behind an endpoint, end to end: `llmaudit audit --endpoint` against a real
`transformers serve` (started here over a random-weight stand-in with the default model's tokenizer; it returns no
log-probabilities, so the audit reads in sampled mode) runs all seven chapters and writes the report; every white-box
test is not measurable because the endpoint exposes no weights, every black-box test that reads probabilities
because the server returns none, and the sampled ones (markedness's FPR gaps, the decision tasks' black-box tests)
have numbers where their answers give them, else a reason saying too few cases were answered (never NaN); the API
key is in no written file; then `--offline`, with the server stopped and the cached passes deleted, rebuilds the same
results from the request ledger, and a request the ledger lacks stops it in one line (exit 2)."""

from __future__ import annotations

import shutil

import pandas as pd
import pytest

from llmaudit.capabilities import NO_LOGPROBS, NO_WEIGHTS
from llmaudit.chapters.decision_tasks.estimates import UNANSWERED
from llmaudit.cli import main
from llmaudit.models.loading.standin import build
from llmaudit.registry import chapter, verdict_tests
from llmaudit.report import Results
from llmaudit.runner.needs import white_box
from llmaudit.verdict.verdicts import NOT_MEASURABLE, verdicts
from servers import transformers_serve

KEY = "sk-test-3b9e71d04c5a4f28"  # what a real key looks like; the test scans every written file for it
# ci sizes, markedness cut to two templates per probe set without the chain-of-thought run, sampled over the whole
# vocabulary (transformers serve refuses the pipeline sampler's top_k); the decision tasks' prompts sampled five times
# each (at the ci profile's few cases the margin asks the cap, 100: some 15,000 requests)
SETTINGS = ["markedness.sampler=full_vocabulary", "markedness.cot=false",
            "markedness.templates={amazon: 2, ns_prompts: 2, regard: 2}", "model.max_samples=5"]


def _audit(url: str, standin, reports, *extra: str) -> int:
    argv = ["audit", "--endpoint", url, "--model", str(standin), "--api-key-env", "AUDIT_KEY", "--profile", "ci",
            "--reports", str(reports), *(arg for setting in SETTINGS for arg in ("--set", setting)), *extra]
    return main(argv)


@pytest.mark.whole_audit  # minutes: `make scale-test` runs it, beside `make test` in `make check`
def test_whole_audit_through_an_endpoint_then_offline(tmp_path, mirror, monkeypatch, capsys):
    monkeypatch.setenv("LLMAUDIT_DATA", str(mirror))
    monkeypatch.setenv("AUDIT_KEY", KEY)
    standin = build("tiny", tmp_path / "standin")
    reports = tmp_path / "reports"
    with transformers_serve(standin, tmp_path / "serve.log") as url:
        assert _audit(url, standin, reports) == 0
    (report,) = [path for path in reports.iterdir() if path.is_dir()]  # beside the cross-model index
    assert (report / "report.html").is_file()
    results = Results(report / "results.csv").table()
    table = verdicts(results).set_index("name")
    declared = {test.name: test for test in verdict_tests()}
    white = [name for name in table.index if white_box(declared[name])]
    assert white and (table.loc[white, "verdict"] == NOT_MEASURABLE).all()
    assert all(any(NO_WEIGHTS in text for text in table.at[name, "unmet"]) for name in white)
    black = table.drop(index=white)
    sampled = black.index.str.endswith("_fpr_gap")  # markedness's FPR gaps: read from sampled answers
    assert black.loc[sampled, "score"].notna().any()  # (a gap no seed had every group's rate for has none: its note)
    decisions = {test.name for test in chapter("decision_tasks").verdict_tests(None)}
    tasks = black[black.index.isin(decisions)]  # the decision tasks': shares of sampled answers
    assert not tasks.empty and all(pd.notna(score) or any(UNANSWERED in text for text in unmet)
                                   for score, unmet in zip(tasks["score"], tasks["unmet"]))
    read = black[~sampled].drop(index=tasks.index)  # validity's black-box gaps read the answer words' probabilities
    assert not read.empty and all(any(NO_LOGPROBS in text for text in unmet) for unmet in read["unmet"])
    html = (report / "report.html").read_text(encoding="utf-8")
    assert NO_WEIGHTS in html and "NaN" not in html
    for path in tmp_path.rglob("*"):
        assert not path.is_file() or KEY.encode() not in path.read_bytes(), path

    monkeypatch.delenv("AUDIT_KEY")  # offline needs no key: nothing is sent
    shutil.rmtree(report / "cache")  # the chapters' cached passes: the ledger alone rebuilds them
    assert _audit(url, standin, reports, "--offline") == 0  # the server is stopped
    again = Results(report / "results.csv").table()
    pd.testing.assert_frame_equal(again.set_index("name")[["value", "lo", "hi", "note"]],
                                  results.set_index("name")[["value", "lo", "hi", "note"]])

    shutil.rmtree(report / "cache")
    ledger = report / "requests" / "markedness.jsonl"
    ledger.write_text("".join(ledger.read_text(encoding="utf-8").splitlines(keepends=True)[:-1]), encoding="utf-8")
    capsys.readouterr()
    assert _audit(url, standin, reports, "--offline", "--chapter", "markedness") == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("llmaudit: error:")]
    assert len(errors) == 1 and "--offline: the request ledger" in errors[0]  # beside the chapter's progress lines


@pytest.mark.parametrize("argv", [["audit", "--model", "org/m", "--offline"], ["audit", "ci", "--offline"]])
def test_offline_goes_with_an_endpoint(argv, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "--offline go" in err and err.count("\n") == 1
