"""The client side of `remote: true` without a server: the host setting, the model loaded offline from a local hub
cache as a local NDIF deployment serves it, and each remote failure as one line. The only 'server' here is a closed
port on 127.0.0.1, which refuses connections as a stopped server does."""

from __future__ import annotations

import socket

import httpx
import pytest
from nnsight.intervention.backends.remote import RemoteError
from pydantic import ValidationError

from llmaudit.errors import AuditError, ConfigError
from llmaudit.models import load_model
from llmaudit.models.loading.hubcache import place
from llmaudit.models.loading.remote import failure_kind
from llmaudit.models.loading.spec import ModelSpec

REPO = "llmaudit-test/tiny-llama"


def closed_port() -> int:
    """A port on 127.0.0.1 that nothing listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def hub_cache(tiny_model_dir, tmp_path, monkeypatch):
    """The tiny model placed in a hub cache of its own under REPO, with the hub offline."""
    from huggingface_hub import constants
    from nnsight import CONFIG

    place(tiny_model_dir, REPO, tmp_path / "hub", "0" * 40)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(CONFIG.API, "HOST", CONFIG.API.HOST)  # restored after the test
    monkeypatch.setattr(CONFIG.API, "APIKEY", None)
    return tmp_path / "hub"


def test_host_only_with_remote() -> None:
    assert ModelSpec(hf=REPO, remote=True, host="http://127.0.0.1:8001").host == "http://127.0.0.1:8001"
    for bad in (dict(hf=REPO, host="http://127.0.0.1:8001"), dict(hf=REPO, remote=True, host="127.0.0.1:8001")):
        with pytest.raises(ValidationError, match="host"):
            ModelSpec(**bad)


def test_placed_model_loads_offline_by_its_id(hub_cache, tiny_model_dir) -> None:
    from transformers import AutoConfig

    assert AutoConfig.from_pretrained(REPO).num_hidden_layers == 4
    snapshot = place(tiny_model_dir, REPO, hub_cache, "0" * 40)  # placing again changes nothing
    assert sorted(p.name for p in snapshot.iterdir()) == sorted(p.name for p in tiny_model_dir.iterdir())
    assert all(p.resolve() == (tiny_model_dir / p.name).resolve() for p in snapshot.iterdir())
    assert (hub_cache / "models--llmaudit-test--tiny-llama" / "refs" / "main").read_text() == "0" * 40


def test_a_local_server_needs_no_api_key_and_a_stopped_one_is_one_line(hub_cache) -> None:
    host = f"http://127.0.0.1:{closed_port()}"
    model = load_model("tiny", ModelSpec(hf=REPO, remote=True, host=host))
    assert model.hf is None and model.provenance["host"] == host
    with pytest.raises(AuditError) as info:
        model.forward([model.chat("she is a nurse")], labels=model.single_token_ids(["yes", "no"]))
    message = str(info.value)
    assert "\n" not in message and host in message and "server down" in message


def test_the_public_service_needs_an_api_key(hub_cache) -> None:
    with pytest.raises(ConfigError, match="API key"):
        load_model("tiny", ModelSpec(hf=REPO, remote=True, host="https://api.ndif.us"))


@pytest.mark.parametrize("error, kind", [
    # the words of the NDIF server (ndif 0.1.2) as nnsight's client raises them
    # a model the server has not deployed, which it would size from the Hub (scripts/ndif, HF_HUB_OFFLINE=1)
    (RemoteError("Could not deploy this model. could not read 'llmaudit/undeployed' from the Hub: Cannot reach "
                 "https://huggingface.co/api/models/llmaudit/undeployed: offline mode is enabled."),
     "deployment has no size"),
    (RemoteError("Could not deploy this model. No GPU nodes available."), "model not deployed"),
    (RemoteError("Could not deploy this model. Could not accommodate any replicas at this time."),
     "model not deployed"),
    (RemoteError("Failed to send request: Invalid API key."), "API key refused"),
    (RemoteError("Failed to send request: Client error '401 Unauthorized' for url"), "API key refused"),
    (RemoteError("Failed to send request: Client error '413 Request Entity Too Large'"), "request too large"),
    (httpx.ReadTimeout("timed out"), "timed out"),
    (ConnectionRefusedError(111, "Connection refused"), "server down"),
    (RemoteError("Execution failed: shape mismatch"), "remote trace failed"),
])
def test_failure_kinds(error: Exception, kind: str) -> None:
    assert failure_kind(error).startswith(kind)


def test_other_errors_are_not_remote_failures() -> None:
    assert failure_kind(ValueError("bad label")) is None


def test_the_model_code_a_remote_trace_ships_names_no_llmaudit_module(tmp_path) -> None:
    """A remote trace carries the tracer (`models.passes.traced.Tracer`, whose method holds the trace) and the audit's
    functions, and `remote.connect` registers llmaudit so that they travel by value: the server has no llmaudit to
    import. Anything pickled by name instead stops every remote request there (a `functools.cache` wrapper in
    models.passes.flex did), so the traced module, with all it reaches, must unpickle in a process that cannot import
    llmaudit (a separate one: unpickling by value in this process would overwrite llmaudit's own classes)."""
    import subprocess
    import sys

    import nnsight
    from nnsight.intervention.serialization import dumps

    import llmaudit
    from llmaudit.models.passes import traced

    nnsight.register(llmaudit)
    (tmp_path / "payload").write_bytes(dumps(traced))
    server = f"""
import sys
class NoAudit:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "llmaudit":
            raise ModuleNotFoundError(f"no module named {{name!r}} on the server")
sys.meta_path.insert(0, NoAudit())
from nnsight.intervention.serialization import loads
loads(open({str(tmp_path / "payload")!r}, "rb").read(), {{"model": None}})
"""
    done = subprocess.run([sys.executable, "-c", server], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr.strip().splitlines()[-1]
