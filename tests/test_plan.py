"""The planning engine (`models.engines.planner`) against the fast engines it plans for: on the same requests it
counts the token-blocks they run and need, exactly for scored passes and sweeps (their derivative and lower states
kept included), and at most what sampling and the greedy demonstration run; and `audit --dry-run` on the ci profile
of a tiny stand-in gives the ledger a real run records, writing nothing but the plan."""

from __future__ import annotations

import json

import pytest
import torch
import yaml

from llmaudit.cli import main
from llmaudit.config import standin_params
from llmaudit.environment import exported
from llmaudit.ledger import read_calls
from llmaudit.models import load_model
from llmaudit.models.ask import ask
from llmaudit.models.loading.planned import PLAN
from llmaudit.models.loading.spec import ModelSpec
from llmaudit.models.loading.standin import build
from llmaudit.models.request import Edit, Keep, Request, Runtime, SampleCall, SampleRequest
from llmaudit.models.vector import SteeringVector
from llmaudit.runner.audit import run_audit

BOUNDED = ("sample", "generate")  # call labels whose planned counts are upper bounds


def _requests(model, vector: SteeringVector, texts: list[str], labels: list[int]) -> None:
    """Scored passes keeping lower states, sweeps that start from them, a derivative alone, sampling, a demo."""
    ask(model, Request(texts=texts, labels=labels, keep=Keep(blocks=(1,)), desc="black-box"))
    lambdas = [None, -2.0, 2.0]
    ask(model, Request(texts=texts, labels=labels, layers=(0, 3), edit=Edit(vector=vector, lambdas=lambdas),
                            desc="sweep"))
    ask(model, Request(texts=texts, labels=labels, edit=Edit(vector=vector, lambdas=lambdas),
                            targets=[0] * len(texts), desc="slope"))
    ask(model, Request(texts=texts[:5], labels=labels, layers=(2,), desc="blocks only"))
    ask(model, SampleRequest(calls=[SampleCall(texts=texts[:3], per_text=2, seed=1),
                                             SampleCall(texts=texts[3:4], per_text=3, seed=2)],
                                      max_new_tokens=6, labels=labels, desc="answers"))
    model.generate(texts[0], 5, vector.intervention(2.0))


@pytest.mark.parametrize("budget", [64, 2048])
def test_the_plan_counts_what_the_fast_engines_run(tiny_model_dir, tmp_path, budget) -> None:
    spec = ModelSpec(path=str(tiny_model_dir))
    real = load_model("tiny", spec)
    with exported(PLAN, "80"):  # as a dry run's kernels load it: planned for an 80 GiB card
        planned = load_model("tiny", spec)
    texts = [real.chat(f"the {'old ' * (i % 4)}man {i} is a doctor", "Answer:") for i in range(9)]
    labels = real.single_token_ids(["yes", "no"])
    torch.manual_seed(0)
    vector = SteeringVector("v", "c", 1, torch.nn.functional.normalize(torch.randn(real.width), dim=0),
                            torch.randn(real.width), 2.0)
    for model, cache in ((real, tmp_path / "run"), (planned, tmp_path / "plan")):  # a cache: lower states kept
        model.runtime = Runtime(cache=cache, batch_tokens=budget, lambda_batch=2)
        _requests(model, vector, texts, labels)
    ran, plan = real.ledger.totals()["calls"], planned.ledger.totals()["calls"]
    assert set(ran) == set(plan)
    for label, counts in ran.items():
        if label in BOUNDED:
            assert counts["actual"] <= plan[label]["actual"] and counts["minimum"] <= plan[label]["minimum"], label
        else:
            assert (counts["actual"], counts["minimum"]) == (plan[label]["actual"], plan[label]["minimum"]), label
    assert sorted(planned.ledger.totals()["plan"]["bounded"]) == sorted(BOUNDED)


def _reasoned(model, texts: list[str], seed: int) -> None:
    """Markedness's chain of thought in small: sampled reasoning after a shared beginning, kept (`followed`), then an
    answer step whose texts continue each text with its own reasoning."""
    calls = [SampleCall(texts=(text,), per_text=1, seed=seed + i) for i, text in enumerate(texts)]
    out = ask(model, SampleRequest(calls=calls, max_new_tokens=8, followed=True))
    reasoned = [text + model.tokenizer.decode([t for t in row[0].tolist() if t >= 0], skip_special_tokens=True)
                + " So the answer is" for text, row in zip(texts, out.tokens)]
    ask(model, SampleRequest(calls=[SampleCall(texts=(text,), per_text=1, seed=seed) for text in reasoned],
                             max_new_tokens=3))


def test_the_plan_follows_the_samplers_shared_beginnings_and_kept_answers(tiny_model_dir) -> None:
    """Sampled calls planned as the sampler runs them: the demonstrations all texts begin with once, the answer
    step after the reasoning it continues; at least what runs (answers at their greatest length), and within a
    fifth of it (planned at every text's whole length, the count was several times what ran)."""
    spec = ModelSpec(path=str(tiny_model_dir))
    real = load_model("tiny", spec)
    with exported(PLAN, "80"):
        planned = load_model("tiny", spec)
    demos = " ".join(f"Example {k}: the {'old ' * (k % 3)}man is a doctor. Sentiment: neutral." for k in range(12))
    texts = [f"{demos} Text: the man {i} is a nurse. Reasoning:" for i in range(12)]
    for model in (real, planned):
        model.runtime = Runtime(batch_tokens=2048)
        _reasoned(model, texts, seed=7)
    ran, plan = real.ledger.totals()["calls"]["sample"], planned.ledger.totals()["calls"]["sample"]
    assert ran["actual"] <= plan["actual"] <= 1.2 * ran["actual"], (ran, plan)


def test_dry_run_plans_the_ledger_a_run_records(tmp_path, mirror, capsys) -> None:
    """The ci profile's steering vectors and decision tasks on a tiny stand-in (about 3 minutes at one thread): every
    call label of the run in the plan; unsteered scored passes equal; every sweep of the plan's own vectors, whose
    layers the model's activations choose, so not those of the run (`models.engines.planner`)."""
    chapters = ["steering_vectors", "decision_tasks"]
    params = standin_params("ci", build("tiny", tmp_path / "model"), "float32") | {"name": "tiny", "chapters": chapters}
    (tmp_path / "tiny.yaml").write_text(yaml.safe_dump(params), encoding="utf-8")
    run_audit(str(tmp_path / "tiny.yaml"), reports=tmp_path / "reports")
    capsys.readouterr()
    assert main(["audit", str(tmp_path / "tiny.yaml"), "--dry-run", "--reports", str(tmp_path / "plans")]) == 0
    assert [p.name for p in (tmp_path / "plans").iterdir()] == ["tiny.plan.json"]  # nothing else written
    printed = capsys.readouterr().out
    assert "steering_vectors" in printed and "decision_tasks" in printed
    planned = json.loads((tmp_path / "plans" / "tiny.plan.json").read_text(encoding="utf-8"))["chapters"]
    recorded = read_calls(tmp_path / "reports" / "tiny")
    for chapter in chapters:
        ran, plan = recorded[chapter], planned[chapter]["calls"]
        assert set(ran) == set(plan), chapter
        for label, counts in ran.items():
            if label.startswith("prefix"):
                assert (counts["actual"], counts["minimum"]) == (plan[label]["actual"], plan[label]["minimum"])
            elif label in BOUNDED:
                assert counts["actual"] <= plan[label]["actual"], label


@pytest.mark.parametrize(("argv", "says"), [
    (["audit", "ci", "--price-per-mtok", "0.15"], "--price-per-mtok goes with --dry-run"),
    (["audit", "ci", "--dry-run", "--price-per-mtok", "-1"], "non-negative price"),
    (["audit", "--endpoint", "http://localhost:8000", "--model", "m", "--dry-run", "--offline"], "leave --offline"),
    (["audit", "ci", "--dry-run", "--endpoint", "http://localhost:8000"], "--endpoint and --offline go with --model"),
])
def test_bad_dry_run_input_is_one_line(argv, says, capsys) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert says in err and err.count("\n") == 1
