"""Where each model family keeps the parts the audit reaches into (decoder blocks, final norm, embedding, rotary
embedding, unembedding), by `config.model_type`, so that no other module spells out `.model.layers`. The paths hold
for the transformers module and for its nnsight wrapper alike; an unknown family is a one-line ConfigError."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import torch

from llmaudit.errors import ConfigError


@dataclass(frozen=True)
class Layout:
    """Attribute paths from the causal-LM module. `decoder` is the base model, whose forward runs the embedding,
    the blocks and the final norm; `rotary` is None where positions are learned embeddings. `split`: the split
    sweep (models.sweep) was checked against the plain steered forward for this family."""

    decoder: str
    blocks: str
    final_norm: str
    embedding: str
    rotary: str | None
    unembedding: str = "lm_head"
    split: bool = False


_LLAMA_LIKE = Layout("model", "model.layers", "model.norm", "model.embed_tokens", "model.rotary_emb")

ARCHITECTURES: dict[str, Layout] = {
    "llama": replace(_LLAMA_LIKE, split=True),
    "mistral": replace(_LLAMA_LIKE, split=True),
    "ministral": replace(_LLAMA_LIKE, split=True),
    "qwen2": replace(_LLAMA_LIKE, split=True),
    "gemma3_text": replace(_LLAMA_LIKE, split=True),
    "qwen3": _LLAMA_LIKE,
    "gemma2": _LLAMA_LIKE,
    "phi3": _LLAMA_LIKE,
    "olmo2": _LLAMA_LIKE,
    "gpt2": Layout("transformer", "transformer.h", "transformer.ln_f", "transformer.wte", None),
}


def layout(model: Any) -> Layout:
    """The layout of a transformers causal LM or its nnsight wrapper, by its `config.model_type`."""
    model_type = model.config.model_type
    if model_type not in ARCHITECTURES:
        raise ConfigError(
            f"model architecture '{model_type}' is not one the audit knows the layout of"
            f" (known: {', '.join(sorted(ARCHITECTURES))}): add it to models/architectures.py"
        )
    return ARCHITECTURES[model_type]


def find(model: Any, path: str) -> Any:
    """The object at a dotted attribute path from `model`."""
    for name in path.split("."):
        model = getattr(model, name)
    return model


def locate(model: Any, path: str) -> tuple[Any, str]:
    """The object holding the attribute at `path` and that attribute's name, for code that swaps the part."""
    owner, _, name = path.rpartition(".")
    return (find(model, owner) if owner else model), name


def decoder(model: Any) -> Any:
    """The base model: embedding, decoder blocks and final norm, returning the last hidden state."""
    return find(model, layout(model).decoder)


def blocks(model: Any) -> Any:
    """The decoder blocks, in order (a ModuleList, or its nnsight envoy)."""
    return find(model, layout(model).blocks)


def unembedding(model: Any) -> Any:
    """The output projection from the final hidden state to the vocabulary logits."""
    return find(model, layout(model).unembedding)


def input_device(model: torch.nn.Module) -> torch.device:
    """Where token ids must go: the device the embedding computes on. A model spread over devices by accelerate
    (`device_map`) may keep offloaded weights on the meta device until a forward; its hook knows the device."""
    embedding = find(model, layout(model).embedding)
    device = getattr(getattr(embedding, "_hf_hook", None), "execution_device", None)
    if device is not None:
        return torch.device(device)
    return next(embedding.parameters()).device
