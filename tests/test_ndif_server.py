"""The remote path against the local NDIF server of scripts/ndif (`make ndif`; skipped while it is not running):
traces run through NDIF's own request path give the local model's numbers, the ledger records them as remote
passes, and a model the server has not deployed is one line."""

from __future__ import annotations

import os
from pathlib import Path

import httpx
import pytest
import torch

from llmaudit.errors import AuditError
from llmaudit.models import load_model
from llmaudit.models.intervention import Intervention
from llmaudit.models.loading.hubcache import DEFAULT_GGUF, DEFAULT_REPO, place
from llmaudit.models.loading.spec import ModelSpec

HOST = "http://127.0.0.1:8001"
HUB = Path(os.environ.get("NDIF_LOCAL_HOME") or Path(__file__).resolve().parents[1] / ".ndif") / "hub"
TOLERANCE = 1e-5  # as scripts/ndif/compare.py


def _serving() -> bool:
    """Whether the local NDIF API answers."""
    try:
        return httpx.get(f"{HOST}/ping", timeout=2).is_success
    except httpx.HTTPError:
        return False


pytestmark = pytest.mark.skipif(not _serving(), reason=f"no local NDIF at {HOST}: make ndif")


@pytest.fixture(scope="module")
def offline():
    """The server's hub cache, read offline, as the remote params file runs."""
    from huggingface_hub import constants

    saved = constants.HF_HUB_CACHE, constants.HF_HUB_OFFLINE
    constants.HF_HUB_CACHE, constants.HF_HUB_OFFLINE = str(HUB), True
    yield HUB
    constants.HF_HUB_CACHE, constants.HF_HUB_OFFLINE = saved


@pytest.fixture(scope="module")
def models(offline):
    """The default model on the server and the same weights loaded here."""
    remote = load_model("remote", ModelSpec(hf=DEFAULT_REPO, remote=True, host=HOST, dtype="float32"))
    local = load_model("local", ModelSpec(embedded=DEFAULT_GGUF, dtype="float32"))
    return remote, local


def _texts(model) -> list[str]:
    return [model.chat("she is a nurse"), model.chat("he builds houses for a living")]


def test_remote_passes_give_the_local_numbers(models) -> None:
    remote, local = models
    labels = remote.single_token_ids(["yes", "no"])
    a = remote.forward(_texts(remote), labels=labels, layers=[3, 7], desc="probe")
    b = local.forward(_texts(local), labels=labels, layers=[3, 7], traced=True)
    torch.testing.assert_close(a.probs, b.probs, rtol=TOLERANCE, atol=TOLERANCE)
    torch.testing.assert_close(a.acts, b.acts, rtol=TOLERANCE, atol=TOLERANCE)  # the saved activations came back
    calls = remote.ledger.totals()["calls"]
    assert list(calls) == ["remote: probe"] and calls["remote: probe"]["actual"] > 0


def test_a_steered_remote_pass_gives_the_local_numbers(models) -> None:
    remote, local = models
    torch.manual_seed(0)
    edit = Intervention(layer=5, direction=torch.nn.functional.normalize(torch.randn(remote.width), dim=0), alpha=4.0)
    labels = remote.single_token_ids(["yes", "no"])
    a = remote.forward(_texts(remote), labels=labels, intervention=edit)
    b = local.forward(_texts(local), labels=labels, intervention=edit)
    unsteered = local.forward(_texts(local), labels=labels, traced=True)
    assert not torch.allclose(b.probs, unsteered.probs, rtol=TOLERANCE, atol=TOLERANCE)  # the edit changes them
    torch.testing.assert_close(a.probs, b.probs, rtol=TOLERANCE, atol=TOLERANCE)


def test_a_model_the_server_has_not_deployed_is_one_line(offline) -> None:
    snapshot = next((offline / f"models--{DEFAULT_REPO.replace('/', '--')}" / "snapshots").iterdir())
    place(snapshot, "llmaudit/undeployed", offline, "1" * 40)  # weights the server could load, with no deployment
    model = load_model("undeployed", ModelSpec(hf="llmaudit/undeployed", remote=True, host=HOST, dtype="float32"))
    with pytest.raises(AuditError) as info:
        model.forward([model.chat("she is a nurse")], labels=model.single_token_ids(["yes", "no"]))
    assert "\n" not in str(info.value) and "deployment has no size" in str(info.value)


def test_a_remote_continuation_is_the_local_one_and_a_remote_pass(models) -> None:
    remote, local = models
    remote.ledger.calls.clear()
    assert remote.generate(_texts(remote)[0], 3) == local.generate(_texts(local)[0], 3)
    calls = remote.ledger.totals()["calls"]
    assert list(calls) == ["remote: generate"] and calls["remote: generate"]["actual"] > 0
