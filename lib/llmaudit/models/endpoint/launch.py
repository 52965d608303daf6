"""Local OpenAI-compatible servers started for an audit or a test: llama-cpp-python's over a GGUF and `transformers
serve` over a model folder, each on a local port, stopped when the block ends."""

from __future__ import annotations

import importlib.util
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from llmaudit.errors import AuditError

STARTUP = 90.0  # seconds a server may take to answer its health route


def free_port() -> int:
    """A TCP port nothing listens on now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def llama_cpp_command(gguf: Path, *, context: int = 4096) -> tuple[list[str], str]:
    """llama-cpp-python's server over `gguf` (its command, missing the port, and its health route); it returns
    log-probabilities only with `logits_all` (its completions refuse `logprobs` without)."""
    try:
        found = importlib.util.find_spec("llama_cpp.server") and importlib.util.find_spec("uvicorn")
    except ModuleNotFoundError:  # no llama_cpp package at all
        found = None
    if not found:
        raise AuditError("llama-cpp-python's server is not installed: pip install 'llama-cpp-python[server]' (make "
                         "test-endpoints builds it, about 8 minutes)")
    return [sys.executable, "-m", "llama_cpp.server", "--model", str(gguf), "--host", "127.0.0.1",
            "--logits_all", "true", "--n_ctx", str(context), "--port"], "/v1/models"


def transformers_serve_command(folder: Path) -> tuple[list[str], str]:
    """`transformers serve` preloading the model in `folder` on the CPU (its command, missing the port, and its health
    route)."""
    command = Path(sys.executable).parent / "transformers"
    if not command.exists():
        raise AuditError("transformers serve is not installed: pip install 'transformers[serving]'")
    return [str(command), "serve", str(folder), "--device", "cpu", "--host", "127.0.0.1", "--port"], "/health"


@contextmanager
def served(command: list[str], health: str, log: Path, *, port: int | None = None,
           startup: float = STARTUP) -> Iterator[str]:
    """The server `command` started with `port` (default: a free one) appended, its output in `log`; yields its base
    URL once GET `health` answers 200, and stops it after. One that exits or stays silent for `startup` seconds is an
    AuditError naming its log."""
    port = free_port() if port is None else port
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("w") as out:
        server = subprocess.Popen([*command, str(port)], stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        if not _healthy(url + health, server, startup):
            tail = log.read_text(errors="replace").strip().splitlines()[-1:] or ["no output"]
            raise AuditError(f"{Path(command[0]).name} {' '.join(command[1:3])} did not answer on port {port} within "
                             f"{startup:.0f} s (see {log}: {tail[0][:200]})")
        yield url
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()


def _healthy(url: str, server: subprocess.Popen, startup: float) -> bool:
    """Whether the server answers GET `url` before it exits or `startup` seconds pass."""
    deadline = time.monotonic() + startup
    while time.monotonic() < deadline and server.poll() is None:
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return True
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    return False
