"""The endpoint engine's chat route against a standard-library server answering as a hosted API does: only
`/v1/chat/completions` (404 on `/v1/completions`), at most the top 20 log-probabilities per token, its own chat
template, and no tokenizer on the auditor's side (`models.endpoint.spellings`). The messages sent come from the
prompt's turns, the answer word is read after the prefix where the model repeats it, a resumed run asks nothing twice,
and the API key is in no written file."""

from __future__ import annotations

import json
import math

import pytest

from conftest import build_tokenizer
from llmaudit.chapters.decision_tasks import TASKS
from llmaudit.chapters.decision_tasks.base import TaskItem
from llmaudit.chapters.decision_tasks.evaluate import TaskRunner
from llmaudit.errors import AuditError
from llmaudit.models.endpoint.chat import INSTRUCTION, answer_position, turns
from llmaudit.models.endpoint.client import Endpoint
from llmaudit.models.endpoint.ledger import FOLDER
from llmaudit.models.endpoint.model import EndpointModel
from llmaudit.models.endpoint.modes import PROBE as PROBE_QUESTION
from llmaudit.models.endpoint.modes import Mode
from llmaudit.models.endpoint.spellings import Spellings
from servers import chat_completion, scripted

CHAT = "/v1/chat/completions"
KEY = "sk-test-0c9e2a7b5d3f1e4a"  # the test scans every written file for it
SYSTEM = "You are a loan officer."
PROBE = (200, {}, chat_completion(["Paris"], [{"Paris": -0.1} | {f" city{i}": -5.0 for i in range(19)}]), 0.0)


def _bad(case: int, group: str) -> float:
    """The P(Bad) the server gives case `case`'s prompt for `group`."""
    return 0.1 * (case + 1) + (0.05 if group == "female" else 0.0)


def hosted(request: dict) -> dict:
    """A hosted API's greedy reply to a credit prompt: even cases repeat the prefix ("Answer", ":", " Good"), odd
    ones answer at once; the answer position's window spells Bad twice (" Bad", "bad") and is cut to the top 20."""
    if request["messages"][-1]["content"] == PROBE_QUESTION:
        return PROBE[2]
    case, group = request["messages"][-1]["content"].split()[1:3]
    bad = _bad(int(case), group)
    window = {" Good": math.log(0.5), " Bad": math.log(bad / 2), "bad": math.log(bad / 2)}
    window |= {f" filler{i}": math.log(0.001) for i in range(30)}
    window = dict(list(window.items())[:min(20, request["top_logprobs"])])
    if int(case) % 2 == 0:
        return chat_completion(["Answer", ":", " Good"], [{"Answer": -0.01}, {":": -0.01}, window])
    return chat_completion([" Good"], [window])


def _model(url: str, tmp_path, monkeypatch, route: str = "chat", tokenizer=None) -> EndpointModel:
    """A model behind `url` on `route` (with no tokenizer, by default), its request ledger under `tmp_path`."""
    monkeypatch.setenv("TEST_CHAT_KEY", KEY)
    model = EndpointModel("m", Endpoint(url=url, model="m", retries=0, api_key_env="TEST_CHAT_KEY", route=route),
                          tokenizer, window=20, provenance={}, system_prompt=SYSTEM, min_coverage=0.995,
                          max_samples=100)
    model.requests.path = tmp_path / FOLDER / "credit.jsonl"
    return model


ITEMS = [TaskItem(f"case {case} {group} good or bad?", "Answer:", group, str(case), 1) for case in range(4)
         for group in ("female", "male")]


def test_chat_route_reads_the_answer_after_the_prefix_from_a_hosted_window(tmp_path, monkeypatch):
    with scripted([(200, {}, hosted, 0.0)], only=CHAT) as (url, received):
        with pytest.raises(AuditError, match="HTTP 404"):
            _model(url, tmp_path, monkeypatch, "completions", build_tokenizer())  # the server has no such route
        model = _model(url, tmp_path, monkeypatch)
        frame = TaskRunner(model, 0).score(ITEMS, TASKS["credit"].answers, "credit explicit")
        assert model.engine.mode == Mode.EXACT and "(chat route)" in model.engine.reason
        again = _model(url, tmp_path, monkeypatch)  # a killed audit restarted on the same folder
        resumed = TaskRunner(again, 0).score(ITEMS, TASKS["credit"].answers, "credit explicit")
    assert again.requests.asked == 0 and resumed.equals(frame)
    asked = received[1:-1]  # after the probe, before the resumed run's probe
    assert len(asked) == len(ITEMS) and len(received) == 2 + len(ITEMS)
    for item, body in zip(sorted(ITEMS, key=lambda item: item.prompt), sorted(asked, key=json.dumps)):
        assert "prompt" not in body and body["logprobs"] is True and body["top_logprobs"] == 20
        assert body["messages"] == [{"role": "system", "content": SYSTEM}, {"role": "user", "content": (
            f"{item.prompt}\n\n{INSTRUCTION.format(prefix='Answer:')}")}]
    for item, row in zip(ITEMS, frame.itertuples()):  # Bad's two spellings summed, read after the repeated prefix
        bad = _bad(int(item.case), item.group)
        assert row.metric == pytest.approx(bad / (0.5 + bad)) and row.coverage == 1.0
        assert json.loads(row.prompt) == {"system": SYSTEM, "user": item.prompt, "prefix": "Answer:"}
    lines = [json.loads(line) for line in model.requests.path.read_text().splitlines()]
    assert {line["route"] for line in lines} == {"chat"} and len(lines) == len(ITEMS)
    for path in tmp_path.rglob("*"):
        assert not path.is_file() or KEY not in path.read_text(errors="replace"), path


def sampled(request: dict) -> dict:
    """A reply with no log-probabilities: seeds of one parity repeat the prefix before Bad, the others say good."""
    said = "Answer: Bad, sadly." if request["seed"] % 2 else "good."
    return chat_completion([said])


def test_sampled_answers_on_the_chat_route_are_read_after_a_repeated_prefix(tmp_path, monkeypatch):
    with scripted([(200, {}, chat_completion(["Paris"]), 0.0), (200, {}, sampled, 0.0)], only=CHAT) \
            as (url, received):
        model = _model(url, tmp_path, monkeypatch)
        assert model.engine.mode == Mode.SAMPLED
        frame = TaskRunner(model, 0).score(ITEMS[:4], TASKS["credit"].answers, "credit explicit")
    for row in frame.itertuples():  # every answer names Good or Bad once the prefix is stripped
        bodies = [body for body in received[1:] if json.dumps(body["messages"]) in json.dumps(turns(row.prompt)[0])]
        assert row.mass == 1.0 and row.metric == pytest.approx(sum(b["seed"] % 2 for b in bodies) / row.samples)
        assert all(b["max_tokens"] > 0 and "logprobs" not in b for b in bodies) and len(bodies) == row.samples


def test_spellings_decode_an_earlier_run_s_answers_from_the_ledger():
    reply = "Answer:Bad, sadly."
    ids = Spellings().encode("Bad, sadly.")  # the answer as an earlier process spelled it, the prefix stripped
    assert Spellings(lambda: [reply]).decode(ids) == "Bad, sadly."
    with pytest.raises(AuditError, match="in no reply of the request ledger"):
        Spellings(lambda: ["Good."]).decode(ids)
    assert Spellings().encode(" Bad") != Spellings().encode(" bad")  # one id per spelling, as the chapters need


@pytest.mark.parametrize(("tokens", "at"), [(["Answer", ":", " Yes"], 2), (["Answer:", "\n", "Yes"], 2),
                                            ([" Yes", " Answer"], 0), (["answer", ":"], 2), (["Ans", "wer", ":"], 3)])
def test_the_answer_is_read_after_the_prefix_where_the_reply_repeats_it(tokens, at):
    assert answer_position(tokens, "Answer:") == at
