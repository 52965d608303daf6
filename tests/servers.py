"""Real servers the endpoint tests start and stop: `transformers serve` over a model folder, on a free local port."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

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
    port = free_port()
    with log.open("w") as out:
        server = subprocess.Popen([str(command), "serve", str(folder), "--port", str(port), "--device", "cpu",
                                   "--host", "127.0.0.1"], stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        if not _healthy(url, server):
            pytest.skip(f"transformers serve did not start within {STARTUP} s: {log.read_text()[-300:]}")
        yield url
    finally:
        server.terminate()
        server.wait(timeout=30)


def _healthy(url: str, server: subprocess.Popen) -> bool:
    """Whether the server answers /health before it exits or STARTUP seconds pass."""
    deadline = time.monotonic() + STARTUP
    while time.monotonic() < deadline and server.poll() is None:
        try:
            if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                return True
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    return False
