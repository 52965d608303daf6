"""The architecture table: for a tiny random model of every family it lists, the paths name the parts they claim
(blocks, final norm, embedding, rotary embedding, unembedding), and the steerable forward, which reaches the blocks
through the table, equals the model's own forward; an unknown family is one line naming it and the known ones."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from conftest import build_tokenizer
from llmaudit.errors import ConfigError
from llmaudit.models import AuditModel, architectures
from llmaudit.models.architectures import ARCHITECTURES

# Config fields some families need at this tiny size (gemma's attention scale, one head width for all).
EXTRA = {"gemma2": {"query_pre_attn_scalar": 8}, "gemma3_text": {"query_pre_attn_scalar": 8}}
TEXT = "the nurse started a new job and she said that it was good"


def build(model_type: str) -> AuditModel:
    """A seeded random 3-block model of `model_type` (width 32) with the conftest tokenizer."""
    from nnsight import TransformersModel
    from transformers import AutoConfig, AutoModelForCausalLM

    tokenizer = build_tokenizer()
    config = AutoConfig.for_model(
        model_type, vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=3,
        num_attention_heads=4, num_key_value_heads=2, head_dim=8, max_position_embeddings=256,
        tie_word_embeddings=False, bos_token_id=2, eos_token_id=1, pad_token_id=1, **EXTRA.get(model_type, {}),
    )
    torch.manual_seed(0)
    hf = AutoModelForCausalLM.from_config(config).eval()
    return AuditModel(model_type, TransformersModel(hf, task="text-generation", tokenizer=tokenizer), tokenizer, hf=hf)


@pytest.mark.parametrize("model_type", sorted(ARCHITECTURES))
def test_paths_name_the_parts(model_type) -> None:
    hf = build(model_type).hf
    layout = ARCHITECTURES[model_type]
    assert hf.config.model_type == model_type
    assert architectures.decoder(hf) is hf.base_model
    blocks = architectures.blocks(hf)
    assert isinstance(blocks, torch.nn.ModuleList) and len(blocks) == hf.config.num_hidden_layers == 3
    assert architectures.find(hf, layout.embedding) is hf.get_input_embeddings()
    assert architectures.unembedding(hf) is hf.get_output_embeddings()
    assert "norm" in type(architectures.find(hf, layout.final_norm)).__name__.lower()
    if layout.rotary is None:
        assert not any("rotary" in type(m).__name__.lower() for m in hf.modules())
    else:
        assert "rotary" in type(architectures.find(hf, layout.rotary)).__name__.lower()
    assert architectures.input_device(hf) == torch.device("cpu")


@pytest.mark.parametrize("model_type", sorted(ARCHITECTURES))
def test_steerable_forward_reads_the_blocks_the_table_names(model_type) -> None:
    """Label probabilities and block outputs through nnsight equal the plain transformers forward."""
    model = build(model_type)
    text = model.chat(TEXT, "answer :")
    labels = model.single_token_ids(["she", "he", "good"])
    ids = torch.tensor([model.tokenizer.encode(text, add_special_tokens=False)])
    with torch.inference_mode():
        out = model.hf(input_ids=ids, output_hidden_states=True)
    got = model.forward([text], labels, layers=[0, 1])
    torch.testing.assert_close(got.probs[0], torch.softmax(out.logits[0, -1], -1)[labels], atol=1e-6, rtol=1e-5)
    for i, layer in enumerate([0, 1]):  # hidden_states[l + 1] is block l's output (the last has the norm applied)
        torch.testing.assert_close(got.acts[0, i], out.hidden_states[layer + 1][0, -1], atol=1e-5, rtol=1e-5)


def test_unknown_architecture_is_one_line_naming_it_and_the_known_ones() -> None:
    lm = SimpleNamespace(config=SimpleNamespace(model_type="mamba", num_hidden_layers=2, hidden_size=8))
    for call in (lambda: architectures.blocks(lm), lambda: AuditModel("x", lm, SimpleNamespace(pad_token_id=0))):
        with pytest.raises(ConfigError) as info:
            call()
        message = str(info.value)
        assert "\n" not in message and "'mamba'" in message
        assert all(name in message for name in ARCHITECTURES)
