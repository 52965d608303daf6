"""Where a causal LM keeps the parts the audit reaches into (decoder blocks, final norm, embedding, rotary
embedding, unembedding). The parts are found through transformers' own accessors
(`get_decoder()`, `get_input_embeddings()`, `get_output_embeddings()`) and the decoder's children, as attribute
paths that hold for the transformers module and for its nnsight wrapper alike; `EXCEPTIONS` names a family's parts
where that search would not find them. Any causal LM transformers loads has a layout; the fast engines run only the
families in `FAST` (`models.engines.choose`), the plain hooked forward (`models.passes.plain`) every other."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from llmaudit.errors import ConfigError

# `config.model_type`s whose fast engines (shared prefix and token trees, split sweep, exact derivative, batched
# sampler, chunked masked attention, kept lower states) tests/test_conformance.py verifies equal to the plain hooked
# forward. A family joins with one line here and a passing suite.
FAST = frozenset({
    "llama",
    "mistral",
    "ministral",
    "qwen2",
    "qwen3",
    "gemma3_text",
    "glm4",
    "olmo2",
    "phi3",
    "smollm3",
})


@dataclass(frozen=True)
class Layout:
    """Attribute paths from the causal-LM module. `decoder` is the base model, whose forward runs the embedding,
    the blocks and the final norm; `rotary` is None where positions are learned embeddings."""

    decoder: str
    blocks: str
    final_norm: str
    embedding: str
    rotary: str | None
    unembedding: str


# Parts a family keeps where the accessors and the decoder's children do not show them: model_type -> part -> path.
EXCEPTIONS: dict[str, dict[str, str]] = {}

_FOUND: dict[type, Layout] = {}  # layouts found, by module class (one class, one structure)


def module_of(model: Any) -> Any:
    """The transformers module of a causal LM or of its nnsight wrapper (an envoy, which keeps it as `_module`)."""
    return model if isinstance(model, torch.nn.Module) else model._module


def layout(model: Any) -> Layout:
    """The layout of a transformers causal LM or its nnsight wrapper; ConfigError (one line) for a model whose
    blocks or final norm cannot be found."""
    hf = module_of(model)
    if type(hf) not in _FOUND:
        _FOUND[type(hf)] = _search(hf)
    return _FOUND[type(hf)]


def _search(hf: Any) -> Layout:
    """The parts of `hf` through its accessors and its decoder's children, `EXCEPTIONS` first."""
    model_type = hf.config.model_type
    given = EXCEPTIONS.get(model_type, {})
    paths = {id(module): name for name, module in hf.named_modules()}
    decoder = hf.get_decoder()
    children = list(decoder.named_children())
    n_blocks = hf.config.num_hidden_layers
    at = [i for i, (_, child) in enumerate(children)
          if isinstance(child, torch.nn.ModuleList) and len(child) == n_blocks]
    norms = [name for name, child in children[at[0] + 1 :] if "norm" in type(child).__name__.lower()] if at else []
    rotary = [name for name, child in children if "rotary" in type(child).__name__.lower()]
    base = paths[id(decoder)]
    found: dict[str, Any] = {
        "blocks": f"{base}.{children[at[0]][0]}" if at else None,
        "final_norm": f"{base}.{norms[0]}" if norms else None,
        "rotary": f"{base}.{rotary[0]}" if rotary else None,
        "embedding": paths.get(id(hf.get_input_embeddings())),
        "unembedding": paths.get(id(hf.get_output_embeddings())),
    } | given
    missing = [part for part in ("blocks", "final_norm", "embedding", "unembedding") if not found[part]]
    if missing:
        raise ConfigError(
            f"cannot find the {' and '.join(missing)} of model architecture '{model_type}' through transformers'"
            " accessors: add them to EXCEPTIONS in models/loading/architectures.py"
        )
    return Layout(base, found["blocks"], found["final_norm"], found["embedding"], found["rotary"],
                  found["unembedding"])


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
