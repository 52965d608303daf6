"""`llmaudit audit --endpoint URL --model NAME --dry-run` plans what the audit through that endpoint asks: on the ci
profile of a tiny stand-in's tokenizer, against a standard-library server that returns log-probabilities (exact mode,
as the plan assumes), the plan's requests and prompt tokens per chapter equal those of the request ledger a real run
writes (`requests/<chapter>.jsonl`), for every chapter an endpoint audit runs in that mode; its completion tokens
equal the answers' asked maximum lengths, which bound the tokens the server sent back; the dry run asks the server
nothing and writes only the plan."""

from __future__ import annotations

import json
import math
import random

import pytest
from transformers import AutoTokenizer

from llmaudit.chapters.decision_tasks import TASKS, answer_ids
from llmaudit.cli import main
from llmaudit.models.engines.planner import PlanLedger, whole_words
from llmaudit.models.loading.standin import build
from servers import completion, scripted

# Every chapter an endpoint audit runs in exact mode, in two runs (each a dry run and a run, a kernel per chapter; the
# first took 98 s of CPU, 252 s on two loaded cores): the decision tasks and markedness (two templates per probe set,
# its chain-of-thought kept: prompts built on sampled answers) in `make test`, the others in `make scale-test`
SMALL = ("markedness.templates={amazon: 2, ns_prompts: 2, regard: 2}",)
RUNS = [pytest.param(("decision_tasks", "markedness"), SMALL, id="decisions-markedness"),
        pytest.param(("validity", "framing", "similarity"), (), id="others", marks=pytest.mark.whole_audit)]


def _reply(words: list[str], tokenizer):
    """A server's answer: the answer words in its window for a scored read; for a sampled one a pronoun (framing
    reads it) and whole words to the asked length, chosen by the prompt and the seed, as a model's sampled answers
    are: of their greatest length and different, so that a prompt built on one (markedness's answer after its
    reasoning) is another prompt, as the plan counts it."""
    window = {word: math.log(1 / (len(words) + 1)) for word in words}
    spelled = whole_words(tokenizer).tolist()

    def reply(request: dict) -> dict:
        if request.get("logprobs"):
            return completion("he", window)
        chosen = random.Random(f"{request['prompt']}{request.get('seed')}")
        rest = [spelled[chosen.randrange(len(spelled))] for _ in range(request["max_tokens"] - 1)]
        return completion(chosen.choice((" he", " she", " they")) + tokenizer.decode(rest))
    return reply


def _ledger(report, chapter: str, tokenizer) -> dict[str, int]:
    """A chapter's requests, prompt tokens, asked answer tokens and answered tokens, from the run's request ledger."""
    lines = [json.loads(line) for line in (report / "requests" / f"{chapter}.jsonl").read_text().splitlines()]
    count = lambda text: len(tokenizer.encode(text, add_special_tokens=False))  # noqa: E731
    return {"requests": len(lines), "prompt": sum(count(line["body"]["prompt"]) for line in lines),
            "completion": sum(line["body"]["max_tokens"] for line in lines),
            "answered": sum(count(line["response"]["choices"][0]["text"]) for line in lines)}


@pytest.mark.parametrize(("chapters", "settings"), RUNS)
def test_the_dry_run_of_an_endpoint_plans_the_requests_and_tokens_its_run_asks(chapters, settings, tmp_path, mirror,
                                                                                monkeypatch, capsys) -> None:
    monkeypatch.setenv("LLMAUDIT_DATA", str(mirror))
    standin = build("tiny", tmp_path / "standin")
    tokenizer = AutoTokenizer.from_pretrained(standin)
    words = sorted({tokenizer.decode([i]) for task in TASKS.values() for i in answer_ids(tokenizer, task.answers)})
    with scripted([(200, {}, _reply(words, tokenizer), 0.0)]) as (url, received):
        argv = ["audit", "--endpoint", url, "--model", str(standin), "--profile", "ci", "--name", "tiny",
                *(arg for chapter in chapters for arg in ("--chapter", chapter)),
                *(arg for setting in settings for arg in ("--set", setting))]
        assert main([*argv, "--dry-run", "--reports", str(tmp_path / "plans")]) == 0
        assert not received  # planned, not asked
        assert [path.name for path in (tmp_path / "plans").iterdir()] == ["tiny.plan.json"]
        assert main([*argv, "--reports", str(tmp_path / "reports")]) == 0
    printed = capsys.readouterr().out
    assert "requests" in printed and all(chapter in printed for chapter in chapters)
    planned = json.loads((tmp_path / "plans" / "tiny.plan.json").read_text())["chapters"]
    for chapter in chapters:
        asked = planned[chapter]["plan"]["requests"].values()
        plan = {key: sum(label[key] for label in asked) for key in ("requests", "prompt", "completion")}
        ran = _ledger(tmp_path / "reports" / "tiny", chapter, tokenizer)
        assert ran["requests"] > 0 and ran["answered"] <= ran["completion"], chapter
        assert {key: ran[key] for key in plan} == plan, chapter


def test_a_request_asked_again_is_planned_once() -> None:
    """An endpoint answers a repeated request from its engine's reads or its request ledger, asking nothing: the
    plan counts it once; a sampled answer with another seed or index is another request."""
    ledger = PlanLedger(blocks=2)
    ledger.ask("explicit", [[1, 2, 3], [4, 5]], 1)
    ledger.ask("implicit", [[1, 2, 3], [6]], 1)  # the first prompt again: one read
    ledger.ask("sample", [[1, 2, 3]] * 2, 4, [(1.0, 1.0, None, 7, 0), (1.0, 1.0, None, 7, 1)])
    ledger.ask("sample", [[1, 2, 3]], 4, [(1.0, 1.0, None, 7, 0)])  # the same seed and index: asked before
    asked = ledger.totals()["plan"]["requests"]
    assert asked["explicit"] == {"requests": 2, "prompt": 5, "completion": 2}
    assert asked["implicit"] == {"requests": 1, "prompt": 1, "completion": 1}
    assert asked["sample"] == {"requests": 2, "prompt": 6, "completion": 8}
