"""Models spread over devices (`model.device_map`): loaded in place by accelerate, never moved afterwards, and the
steerable forward, the shared-prefix forward, the split sweep and its exact derivative equal those of the same
weights on one device.

This machine has no GPU, and accelerate runs every module whose device is "cpu" or "disk" on the CPU, so the blocks
cannot sit on two real devices here. What is tested is what accelerate does on the way, with the tiny Llama of
conftest.py: "hooks" gives every block its own device hook (moving the hidden state in and out, as between GPUs),
and "offload" keeps half the blocks and the final norm on disk, their weights on the meta device until their
forward, as a model larger than its GPUs is run. `load_model` gets these placements from a stand-in for
`from_pretrained` that replaces the strategy name (which here would put everything on the CPU) by the split."""

from __future__ import annotations

import pytest
import torch

from llmaudit.models import load_model
from llmaudit.models.loading import architectures
from llmaudit.models.loading.spec import ModelSpec
from llmaudit.models.passes.derivative import _offloaded
from llmaudit.models.passes.prefix import forward_shared_prefix
from llmaudit.models.passes.sweep import split_sweep
from llmaudit.models.vector import SteeringVector

PLACES = {"model.embed_tokens": "cpu", "model.rotary_emb": "cpu", "lm_head": "cpu",
          "model.layers.0": "cpu", "model.layers.1": "disk", "model.layers.2": "cpu", "model.layers.3": "disk",
          "model.norm": "disk"}
PROMPTS = ["she", "the nurse started a new job and she said that it was good", "a woman and a man",
           "write one sentence about a doctor who started a new job"]
LAMBDAS = [-1.0, 0.0, 0.5, 1.0]


def spread_loader(kind: str, offload_folder, real):
    """A stand-in for AutoModelForCausalLM.from_pretrained that places the model by the split of `kind`."""
    from accelerate import dispatch_model

    def load(klass, folder, *args, device_map=None, **kwargs):
        assert device_map == "balanced"
        if kind == "offload":
            return real(klass, folder, *args, device_map=PLACES, offload_folder=str(offload_folder), **kwargs)
        hf = real(klass, folder, *args, **kwargs)
        return dispatch_model(hf, {name: "cpu" for name in PLACES}, force_hooks=True)

    return classmethod(load)


@pytest.fixture(scope="module", params=["hooks", "offload"])
def spread(request, tiny_model_dir, tmp_path_factory):
    from transformers import AutoModelForCausalLM

    real = AutoModelForCausalLM.from_pretrained.__func__
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(AutoModelForCausalLM, "from_pretrained",
                      spread_loader(request.param, tmp_path_factory.mktemp("offload"), real))
        return request.param, load_model("spread", ModelSpec(path=str(tiny_model_dir), device_map="balanced"))


def texts_labels(model) -> tuple[list[str], list[int]]:
    return [model.chat(p, "answer :") for p in PROMPTS], model.single_token_ids(["she", "he", "good"])


def test_load_passes_the_device_map_and_leaves_placement_to_accelerate(tiny_model, tiny_model_dir, monkeypatch):
    from transformers import AutoModelForCausalLM, PreTrainedModel

    real, seen, moves = AutoModelForCausalLM.from_pretrained.__func__, [], []

    def spy(klass, *args, **kwargs):
        seen.append(kwargs.get("device_map"))
        return real(klass, *args, **kwargs)

    monkeypatch.setattr(AutoModelForCausalLM, "from_pretrained", classmethod(spy))
    monkeypatch.setattr(PreTrainedModel, "to", lambda self, *args, **kwargs: moves.append(args) or self)
    model = load_model("auto", ModelSpec(path=str(tiny_model_dir), device_map="auto"))
    assert seen == ["auto"] and moves == [] and model.device == "cpu"
    load_model("plain", ModelSpec(path=str(tiny_model_dir)))
    assert seen == ["auto", None] and moves == [("cpu",)]
    texts, labels = texts_labels(model)
    assert torch.equal(model.forward(texts, labels).probs, tiny_model.forward(texts, labels).probs)


def test_the_split_is_real(spread) -> None:
    kind, model = spread
    hf = model.hf
    assert hf.hf_device_map and model.device == "cpu" and architectures.input_device(hf) == torch.device("cpu")
    assert all(hasattr(block, "_hf_hook") for block in architectures.blocks(hf))
    offloaded = [p.device.type == "meta" for p in architectures.blocks(hf)[1].parameters()]
    assert all(offloaded) if kind == "offload" else not any(offloaded)
    assert _offloaded(hf) == (kind == "offload")


def test_forwards_equal_the_model_on_one_device(spread, tiny_model) -> None:
    _, model = spread
    texts, labels = texts_labels(model)
    vector = SteeringVector("v", "gender", 1, torch.nn.functional.normalize(torch.ones(model.width), dim=0),
                            torch.zeros(model.width), k=3.0)
    for edit in (None, vector.intervention(1.0)):
        got, want = (m.forward(texts, labels, [0, 1, 3], edit, batch_tokens=60) for m in (model, tiny_model))
        torch.testing.assert_close(got.probs, want.probs, atol=1e-6, rtol=0)
        torch.testing.assert_close(got.acts, want.acts, atol=1e-5, rtol=0)
    shared = [model.chat("the nurse said good . the doctor said bad . the " + p) for p in ("teacher", "engineer")]
    got, want = (forward_shared_prefix(m.handle, shared, labels, [1, 3], batch_tokens=40) for m in (model, tiny_model))
    torch.testing.assert_close(got.probs, want.probs, atol=1e-6, rtol=0)
    torch.testing.assert_close(got.acts, want.acts, atol=1e-5, rtol=0)


@pytest.mark.parametrize("layer", [0, 1, 2])
def test_sweep_and_derivative_equal_the_model_on_one_device(spread, tiny_model, layer) -> None:
    """Steering at a block on the CPU whose upper blocks are partly offloaded (0, 2) and at an offloaded block (1)."""
    _, model = spread
    texts, labels = texts_labels(model)
    targets = [i % len(labels) for i in range(len(texts))]
    acts = tiny_model.forward(texts, labels, layers=[layer]).acts[:, 0]
    generator = torch.Generator().manual_seed(3)
    direction = torch.nn.functional.normalize(torch.randn(model.width, generator=generator), dim=0)
    vector = SteeringVector("v", "gender", layer, direction, acts.mean(0), k=2.5)
    got, want = (split_sweep(m.handle, texts, labels, vector, LAMBDAS, targets, batch_tokens=60, lambda_batch=3)
                 for m in (model, tiny_model))
    torch.testing.assert_close(got.probs, want.probs, atol=1e-5, rtol=0)
    torch.testing.assert_close(got.derivative, want.derivative, atol=1e-5, rtol=0)
    assert (want.probs[0] - want.probs[-1]).abs().max() > 1e-3 and want.derivative.abs().max() > 1e-3
