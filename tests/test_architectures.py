"""Finding a family's parts: the steerable forward (nnsight), which reaches the blocks through the layout found by
transformers' accessors, equals the model's own forward for every family of the conformance suite; a model whose
blocks cannot be found is one line naming it and where to add its parts."""

from __future__ import annotations

import pytest
import torch

from llmaudit.errors import ConfigError
from llmaudit.models import architectures
from test_conformance import FAMILIES, build

TEXT = "the nurse started a new job and she said that it was good"


@pytest.mark.parametrize("model_type", sorted(FAMILIES))
def test_steerable_forward_reads_the_blocks_the_layout_names(model_type) -> None:
    """Label probabilities and block outputs through nnsight equal the plain transformers forward."""
    model = build(model_type)
    text = model.chat(TEXT, "answer :")
    labels = model.single_token_ids(["she", "he", "good"])
    ids = torch.tensor([model.tokenizer.encode(text, add_special_tokens=False)])
    with torch.inference_mode():
        out = model.hf(input_ids=ids, output_hidden_states=True)
    got = model.forward([text], labels, layers=[0, 1], traced=True)
    torch.testing.assert_close(got.probs[0], torch.softmax(out.logits[0, -1], -1)[labels], atol=1e-6, rtol=1e-5)
    for i, layer in enumerate([0, 1]):  # hidden_states[l + 1] is block l's output (the last has the norm applied)
        torch.testing.assert_close(got.acts[0, i], out.hidden_states[layer + 1][0, -1], atol=1e-5, rtol=1e-5)


def test_a_model_whose_blocks_cannot_be_found_is_one_line_naming_it(monkeypatch) -> None:
    model = build("llama").hf
    model.model.layers = torch.nn.ModuleList(list(model.model.layers)[:2])  # no list of num_hidden_layers blocks
    monkeypatch.setattr(architectures, "_FOUND", {})
    with pytest.raises(ConfigError) as info:
        architectures.layout(model)
    message = str(info.value)
    assert "\n" not in message and "'llama'" in message and "blocks" in message and "EXCEPTIONS" in message
