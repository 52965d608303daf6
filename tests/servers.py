"""Real servers the endpoint tests start and stop on a free local port: `transformers serve` over a model folder,
llama-cpp-python's OpenAI-compatible server over a GGUF, and a small standard-library server scripted to answer what
no real server produces on demand (`scripted`)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

STARTUP = 90  # seconds a server may take to answer /health before its tests are skipped


def free_port() -> int:
    """A TCP port nothing listens on now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def transformers_serve(folder: Path, log: Path) -> Iterator[str]:
    """`transformers serve` preloading the model in `folder`; yields its base URL; skips the test where it cannot
    start (the serving extra missing, or no answer within STARTUP seconds)."""
    command = Path(sys.executable).parent / "transformers"
    if not command.exists():
        pytest.skip("transformers serve is not installed (pip install 'transformers[serving]')")
    with _served([str(command), "serve", str(folder), "--device", "cpu", "--host", "127.0.0.1", "--port"], log,
                 "/health") as url:
        yield url


@contextmanager
def llama_cpp_server(gguf: Path, log: Path) -> Iterator[str]:
    """llama-cpp-python's OpenAI-compatible server over `gguf`; yields its base URL; skips the test where it is not
    installed (make test-endpoints builds it) or does not start."""
    try:
        import llama_cpp.server  # noqa: F401
    except ImportError:
        pytest.skip("llama-cpp-python's server is not installed: pip install 'llama-cpp-python[server]'")
    with _served([sys.executable, "-m", "llama_cpp.server", "--model", str(gguf), "--host", "127.0.0.1",
                  "--logits_all", "true", "--n_ctx", "2048", "--port"], log, "/v1/models") as url:
        yield url


@contextmanager
def _served(command: list[str], log: Path, health: str) -> Iterator[str]:
    """A server started by `command` followed by a free port; yields its base URL once GET `health` answers."""
    port = free_port()
    with log.open("w") as out:
        server = subprocess.Popen([*command, str(port)], stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        if not _healthy(url + health, server):
            pytest.skip(f"{command[0]} did not start within {STARTUP} s: {log.read_text()[-300:]}")
        yield url
    finally:
        server.terminate()
        server.wait(timeout=30)


def _healthy(url: str, server: subprocess.Popen) -> bool:
    """Whether the server answers GET `url` before it exits or STARTUP seconds pass."""
    deadline = time.monotonic() + STARTUP
    while time.monotonic() < deadline and server.poll() is None:
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return True
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    return False


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
