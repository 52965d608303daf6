"""Real servers the endpoint tests start and stop on a free local port: `transformers serve` over a model folder,
llama-cpp-python's OpenAI-compatible server over a GGUF, and a small standard-library server scripted to answer what
no real server produces on demand (`scripted`)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from llmaudit.errors import AuditError
from llmaudit.models.endpoint.launch import llama_cpp_command, served, transformers_serve_command


@contextmanager
def transformers_serve(folder: Path, log: Path) -> Iterator[str]:
    """`transformers serve` preloading the model in `folder`; yields its base URL; skips the test where it cannot
    start (the serving extra missing, or no answer in time)."""
    with _skipped_unless_served(lambda: transformers_serve_command(folder), log) as url:
        yield url


@contextmanager
def llama_cpp_server(gguf: Path, log: Path) -> Iterator[str]:
    """llama-cpp-python's OpenAI-compatible server over `gguf`; yields its base URL; skips the test where it is not
    installed (make test-endpoints builds it) or does not start."""
    with _skipped_unless_served(lambda: llama_cpp_command(gguf), log) as url:
        yield url


@contextmanager
def _skipped_unless_served(command: Callable[[], tuple[list[str], str]], log: Path) -> Iterator[str]:
    """`launch.served` over `command()`'s server; the test is skipped with the launcher's line where the server is
    not installed or does not start."""
    stack = ExitStack()
    try:
        argv, health = command()
        url = stack.enter_context(served(argv, health, log))
    except AuditError as err:
        pytest.skip(str(err))
    with stack:
        yield url


def completion(text: str = "yes", top: dict[str, float] | None = None, fingerprint: str = "fp-1") -> dict:
    """A completion's JSON, with one position's log-probabilities where `top` is given."""
    logprobs = None if top is None else {"tokens": [text], "token_logprobs": [-0.1], "top_logprobs": [top]}
    return {"id": "x", "object": "text_completion", "created": 0, "model": "m", "system_fingerprint": fingerprint,
            "choices": [{"index": 0, "text": text, "finish_reason": "length", "logprobs": logprobs}]}


def chat_completion(tokens: list[str], tops: list[dict[str, float]] | None = None, fingerprint: str = "fp-1") -> dict:
    """A chat completion's JSON saying `tokens`, with each token's window of log-probabilities where `tops` is given
    (as hosted APIs return them: a list of {token, logprob} per position)."""
    logprobs = None if tops is None else {"content": [
        {"token": token, "logprob": top.get(token, -9.0), "bytes": None,
         "top_logprobs": [{"token": name, "logprob": value, "bytes": None} for name, value in top.items()]}
        for token, top in zip(tokens, tops)]}
    return {"id": "x", "object": "chat.completion", "created": 0, "model": "m", "system_fingerprint": fingerprint,
            "choices": [{"index": 0, "finish_reason": "length", "logprobs": logprobs,
                         "message": {"role": "assistant", "content": "".join(tokens)}}]}


@contextmanager
def scripted(replies: list[tuple[int, dict[str, str], Any, float]], only: str | None = None) \
        -> Iterator[tuple[str, list]]:
    """A server answering each POST with the next of `replies` (status, headers, body or a function of the request's
    JSON giving it, seconds to wait first), the last one repeated; yields its URL and the bodies it received. With
    `only` (a path, e.g. /v1/chat/completions), a POST elsewhere is answered 404, as a hosted API answers a route it
    lacks, and not received."""
    received: list[dict] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (the standard library's name)
            request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            if only is not None and self.path != only:
                self.send_error(404, f"no route {self.path}")
                return
            received.append(request)
            status, headers, body, wait = replies[min(len(received), len(replies)) - 1]
            time.sleep(wait)
            body = body(request) if callable(body) else body
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
