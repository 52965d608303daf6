"""Finding a family's parts: a model whose blocks cannot be found is one line naming it and where to add its parts
(tests/test_conformance.py checks the parts found for every family it builds)."""

from __future__ import annotations

import pytest
import torch

from llmaudit.errors import ConfigError
from llmaudit.models.loading import architectures
from test_conformance import build


def test_a_model_whose_blocks_cannot_be_found_is_one_line_naming_it(monkeypatch) -> None:
    model = build("llama").hf
    model.model.layers = torch.nn.ModuleList(list(model.model.layers)[:2])  # no list of num_hidden_layers blocks
    monkeypatch.setattr(architectures, "_FOUND", {})
    with pytest.raises(ConfigError) as info:
        architectures.layout(model)
    message = str(info.value)
    assert "\n" not in message and "'llama'" in message and "blocks" in message and "EXCEPTIONS" in message
