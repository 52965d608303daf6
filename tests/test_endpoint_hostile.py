"""The endpoint engine against a hostile server: a small real HTTP server (the standard library's, on a local port)
scripted to answer what no real server produces on demand: 429 storms with Retry-After, 500s, malformed JSON, no
reply in time, log-probabilities for tokens other than the answer words. Each ends in a retry that succeeds or in one
clear AuditError line, and the ledger keeps every finished exchange."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from conftest import build_tokenizer
from llmaudit.errors import AuditError
from llmaudit.models.ask import ask
from llmaudit.models.endpoint.client import Client, Endpoint
from llmaudit.models.endpoint.model import EndpointModel
from llmaudit.models.endpoint.modes import Mode
from llmaudit.models.request import Request


def _completion(text: str = "yes", top: dict[str, float] | None = None) -> dict:
    """A completion's JSON, with one position's log-probabilities where `top` is given."""
    logprobs = None if top is None else {"tokens": [text], "token_logprobs": [-0.1], "top_logprobs": [top]}
    return {"id": "x", "object": "text_completion", "created": 0, "model": "m", "system_fingerprint": "fp-1",
            "choices": [{"index": 0, "text": text, "finish_reason": "length", "logprobs": logprobs}]}


@contextmanager
def scripted(replies: list[tuple[int, dict[str, str], bytes | dict, float]]) -> Iterator[tuple[str, list]]:
    """A server answering each POST with the next of `replies` (status, headers, body, seconds to wait first), the
    last one repeated; yields its URL and the bodies it received."""
    received: list[dict] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (the standard library's name)
            received.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            status, headers, body, wait = replies[min(len(received), len(replies)) - 1]
            time.sleep(wait)
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            try:
                self.send_response(status)
                for name, value in {"Content-Type": "application/json", **headers}.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up waiting

        def log_message(self, *args) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", received
    finally:
        server.shutdown()
        server.server_close()


PROBE = (200, {}, _completion("Paris", {"Paris": -0.1, "Lyon": -3.0}), 0.0)
OK = (200, {}, _completion("yes", {"yes": -0.5, "no": -1.2, "maybe": -3.0}), 0.0)


def _model(url: str, retries: int = 3, timeout: float = 5.0) -> EndpointModel:
    endpoint = Endpoint(url=url, model="m", timeout=timeout, retries=retries)
    return EndpointModel("m", endpoint, build_tokenizer(), window=20, provenance={})


def _score(model: EndpointModel) -> list[list[float]]:
    ids = model.tokenizer.convert_tokens_to_ids(["yes", "no"])
    return ask(model, Request(texts=["<|user|> yes or no <eos> <|assistant|> "], labels=ids)).probs[0].tolist()


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
    other = (200, {}, _completion("maybe", {"maybe": -0.01, "perhaps": -5.0}), 0.0)
    with scripted([PROBE, other]) as (url, _):
        model = _model(url)
        probs = _score(model)
    assert probs[0] == [0.0, 0.0]
    assert model.engine.mode == Mode.TOP_K and model.engine.coverage == [0.0]


def test_key_sent_as_bearer_never_in_the_body(monkeypatch):
    monkeypatch.setenv("HOSTILE_KEY", "sk-secret-123")
    with scripted([PROBE]) as (url, received):
        exchange = Client(Endpoint(url=url, model="m", api_key_env="HOSTILE_KEY")).complete({"model": "m",
                                                                                             "prompt": "x"})
    assert "sk-secret-123" not in json.dumps(exchange) and "sk-secret-123" not in json.dumps(received)
