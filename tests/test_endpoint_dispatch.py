"""Concurrent dispatch to an endpoint (`model.concurrency`): against a standard-library server answering each request
after a fixed latency, a pool of requests finishes several times faster than one at a time, with every result and
every ledger line in the order asked; prompts go out in the order of their text, so those sharing a beginning reach
the server together (where its prefix cache holds that beginning)."""

from __future__ import annotations

import json
import math
import time

import pytest

from conftest import build_tokenizer
from llmaudit.errors import AuditError
from llmaudit.models.ask import ask
from llmaudit.models.endpoint.client import Endpoint
from llmaudit.models.endpoint.model import EndpointModel
from llmaudit.models.request import Request
from servers import completion, scripted

PROBE = (200, {}, completion("Paris", {"Paris": -0.1, "Lyon": -3.0}), 0.0)
LATENCY = 0.2  # seconds the server takes per request


def _by_prompt(request: dict) -> dict:
    """A reply whose P(yes) is the prompt's number / 100 ('... q7' -> 0.07)."""
    number = int(request["prompt"].rsplit("q", 1)[1])
    return completion("yes", {"yes": math.log(number / 100), "no": math.log(0.5)})


def _run(texts: list[str], concurrency: int, folder) -> tuple[list[float], float, list[dict], list[dict]]:
    """P(yes) per text, the seconds the pass took, the ledger's lines and the requests the server received."""
    with scripted([PROBE, (200, {}, _by_prompt, LATENCY)]) as (url, received):
        model = EndpointModel("m", Endpoint(url=url, model="m", concurrency=concurrency), build_tokenizer(), window=20,
                              provenance={}, min_coverage=0.995, max_samples=100, chat_template=False)
        model.requests.path = folder / "requests.jsonl"
        ids = model.tokenizer.convert_tokens_to_ids(["yes", "no"])
        started = time.perf_counter()
        probs = ask(model, Request(texts=texts, labels=ids)).probs[0][:, 0].tolist()
        seconds = time.perf_counter() - started
    return probs, seconds, [json.loads(line) for line in model.requests.path.read_text().splitlines()], received[1:]


def test_a_pool_is_faster_and_keeps_the_asked_order(tmp_path):
    texts = [f"question q{i}" for i in range(32, 0, -1)]
    one, alone, _, _ = _run(texts, 1, tmp_path / "one")
    eight, pooled, lines, _ = _run(texts, 8, tmp_path / "eight")
    print(f"32 requests at {LATENCY} s each: {alone:.2f} s one at a time, {pooled:.2f} s eight at a time")
    assert eight == one == pytest.approx([i / 100 for i in range(32, 0, -1)])
    assert [line["body"]["prompt"] for line in lines] == texts  # the ledger in the order asked
    assert alone / pooled > 3


def test_prompts_sharing_a_beginning_go_out_together(tmp_path):
    texts = ["profile A, male: q1", "profile B, male: q2", "profile A, female: q3", "profile B, female: q4"]
    _, _, lines, received = _run(texts, 1, tmp_path)
    assert [request["prompt"] for request in received] == [texts[2], texts[0], texts[3], texts[1]]
    assert [line["body"]["prompt"] for line in lines] == texts


def test_a_failed_request_keeps_the_replies_already_in(tmp_path):
    texts = ["question q5", "question q4", "question q3", "question q2", "question q1"]  # sent in the order q1...

    def reply(request: dict) -> dict | bytes:
        return b"{not json" if request["prompt"].endswith("q3") else _by_prompt(request)

    with scripted([PROBE, (200, {}, reply, 0.0)]) as (url, received):
        model = EndpointModel("m", Endpoint(url=url, model="m", retries=0, concurrency=1), build_tokenizer(),
                              window=20, provenance={}, min_coverage=0.995, max_samples=100, chat_template=False)
        model.requests.path = tmp_path / "requests.jsonl"
        with pytest.raises(AuditError, match="not a completion's JSON"):
            ask(model, Request(texts=texts, labels=model.tokenizer.convert_tokens_to_ids(["yes", "no"])))
    kept = [json.loads(line)["body"]["prompt"] for line in model.requests.path.read_text().splitlines()]
    # q3 fails; q4 may be in flight by then (kept too), q5 never starts; the replies kept in the order asked
    assert kept in (["question q2", "question q1"], ["question q4", "question q2", "question q1"])
    assert len(received) - 1 == len(kept) + 1
