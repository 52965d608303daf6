"""The endpoint engine against a hostile server: a small real HTTP server (the standard library's, on a local port)
scripted to answer what no real server produces on demand: 429 storms with Retry-After, 500s, malformed JSON, no
reply in time, log-probabilities for tokens other than the answer words. Each ends in a retry that succeeds or in one
clear AuditError line, and the ledger keeps every finished exchange."""

from __future__ import annotations

import json
import time

import pytest

from conftest import build_tokenizer
from llmaudit.errors import AuditError
from llmaudit.models.ask import ask
from llmaudit.models.endpoint.client import Client, Endpoint
from llmaudit.models.endpoint.model import EndpointModel
from llmaudit.models.endpoint.modes import Mode
from llmaudit.models.request import Request
from servers import completion, scripted

PROBE = (200, {}, completion("Paris", {"Paris": -0.1, "Lyon": -3.0}), 0.0)
OK = (200, {}, completion("yes", {"yes": -0.5, "no": -1.2, "maybe": -3.0}), 0.0)


def _model(url: str, retries: int = 3, timeout: float = 5.0) -> EndpointModel:
    endpoint = Endpoint(url=url, model="m", timeout=timeout, retries=retries)
    return EndpointModel("m", endpoint, build_tokenizer(), window=20, provenance={}, min_coverage=0.995,
                         max_samples=100)


TEXTS = ["<|user|> yes or no <eos> <|assistant|> "]


def _ids(model: EndpointModel) -> list[int]:
    return model.tokenizer.convert_tokens_to_ids(["yes", "no"])


def _score(model: EndpointModel) -> list[list[float]]:
    return ask(model, Request(texts=TEXTS, labels=_ids(model))).probs[0].tolist()


def test_429_storm_retried_after_retry_after():
    storm = (429, {"Retry-After": "0.3"}, {"error": {"message": "slow down"}}, 0.0)
    with scripted([PROBE, storm, storm, OK]) as (url, received):
        model = _model(url)
        started = time.perf_counter()
        probs = _score(model)
        assert time.perf_counter() - started >= 0.6  # both waits honoured
    assert len(received) == 4
    assert probs[0] == pytest.approx([0.60653, 0.30119], abs=1e-4)  # exp(-0.5), exp(-1.2): read exactly
    assert next(iter(model.requests._exchanges().values()))["retries"] == 2
    assert model.engine.mode == Mode.EXACT


def test_500s_end_in_one_line_after_bounded_retries():
    with scripted([PROBE, (500, {}, {"error": {"message": "boom"}}, 0.0)]) as (url, received):
        with pytest.raises(AuditError, match=r"HTTP 500 after 2 retries") as raised:
            _score(_model(url, retries=2))
    assert len(received) == 1 + 3 and "\n" not in str(raised.value)


def test_malformed_json_is_one_line():
    with scripted([PROBE, (200, {}, b"{not json", 0.0)]) as (url, _):
        with pytest.raises(AuditError, match="not a completion's JSON"):
            _score(_model(url))


def test_timeout_is_one_line():
    with scripted([PROBE, (*OK[:3], 3.0)]) as (url, received):
        with pytest.raises(AuditError, match=r"no reply within 0.5 s"):
            _score(_model(url, retries=1, timeout=0.5))
    assert len(received) == 3


def test_logprobs_of_other_tokens_read_as_top_k_with_their_coverage():
    other = (200, {}, completion("maybe", {"maybe": -0.01, "perhaps": -5.0}), 0.0)
    with scripted([PROBE, other]) as (url, _):
        model = _model(url)
        probs = _score(model)
    assert probs[0] == [0.0, 0.0]
    assert model.engine.mode == Mode.TOP_K and model.engine.coverage(TEXTS, _ids(model)) == [0.0]


def test_key_sent_as_bearer_never_in_the_body(monkeypatch):
    monkeypatch.setenv("HOSTILE_KEY", "sk-secret-123")
    with scripted([PROBE]) as (url, received):
        exchange = Client(Endpoint(url=url, model="m", api_key_env="HOSTILE_KEY")).complete({"model": "m",
                                                                                             "prompt": "x"})
    assert "sk-secret-123" not in json.dumps(exchange) and "sk-secret-123" not in json.dumps(received)


def test_a_fingerprint_changed_mid_run_is_noted_in_the_chapters_engine_line(tmp_path):
    later = (200, {}, completion("yes", {"yes": -0.5, "no": -1.2}, fingerprint="fp-2"), 0.0)
    with scripted([PROBE, OK, later]) as (url, _):
        model = _model(url)
        model.ledger.path = tmp_path / "ledger.json"  # the compute ledger, whose engine line the model card shows
        ask(model, Request(texts=TEXTS, labels=_ids(model)))
        assert "fingerprints seen" not in json.loads(model.ledger.path.read_text())["engine"]
        ask(model, Request(texts=[TEXTS[0] + "please "], labels=_ids(model)))
    line = json.loads(model.ledger.path.read_text())["engine"]
    assert "fingerprint fp-1" in line and "fingerprints seen fp-1, fp-2: changed mid-run" in line
