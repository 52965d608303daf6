"""Prompts that share a long beginning (few-shot demonstrations, one instruction): the shared tokens run once and
their key/value cache serves every continuation, so a 9-shot prompt costs little more than a zero-shot one.

The split is made on token ids (the longest common prefix of the tokenised prompts), so every prompt is
tokenised exactly as on its own and the results equal `AuditModel.forward`'s."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from contextlib import nullcontext
from typing import TYPE_CHECKING

import torch
from tqdm import tqdm

from llmaudit.models import architectures
from llmaudit.models.blocks import running
from llmaudit.models.layers import hidden
from llmaudit.models.batching import ForwardOutput, activations_only, memory_guard, pad, readout, token_batches

if TYPE_CHECKING:
    from llmaudit.models.runtime import AuditModel


def common_prefix(encoded: Sequence[Sequence[int]]) -> int:
    """Length of the longest token prefix all sequences share, leaving each at least one token of its own."""
    shortest = min(len(e) for e in encoded)
    n = 0
    while n < shortest - 1 and all(e[n] == encoded[0][n] for e in encoded):
        n += 1
    return n


def forward_shared_prefix(
    model: AuditModel,
    texts: Sequence[str],
    labels: Sequence[int] | None,
    layers: Sequence[int] = (),
    batch_tokens: int = 4096,
    desc: str | None = None,
) -> ForwardOutput:
    """Label probabilities (log-probabilities over the vocabulary when `labels` is None) and activations of
    chat-formatted texts, their common beginning computed once and, when no label is read, no block above the
    deepest layer read; equal to the traced forward, which remote models take."""
    if model.hf is None:
        return model.forward(texts, labels, layers, batch_tokens=batch_tokens, desc=desc)
    encoded = model.encode(texts)
    shared = common_prefix(encoded)
    device = model.device
    probs: list[torch.Tensor | None] = [None] * len(texts)
    acts = torch.empty(len(texts), len(layers), model.width) if layers else None
    depth = max(layers) + 1 if activations_only(labels, layers) else model.n_layers
    upper_skipped = running(model.hf, range(depth), final_norm=False) if depth < model.n_layers else nullcontext()
    with torch.inference_mode(), memory_guard(batch_tokens), model.ledger.account(encoded, depth), upper_skipped:
        prefix = torch.tensor([encoded[0][:shared]], device=device)
        cache = architectures.decoder(model.hf)(input_ids=prefix, use_cache=True).past_key_values if shared else None
        rest = [e[shared:] for e in encoded]
        order = sorted(range(len(texts)), key=lambda i: -len(rest[i]))
        with tqdm(total=len(texts), desc=desc, disable=desc is None, leave=False) as bar:
            # the budget counts the tokens each batch computes: the continuations (the prefix is cached)
            for batch in token_batches(order, [len(r) for r in rest], batch_tokens):
                p, a = _continue(model, cache, shared, [rest[i] for i in batch], labels, layers)
                for row, i in enumerate(batch):
                    probs[i] = p[row]
                if acts is not None:
                    acts[batch] = a
                bar.update(len(batch))
    return ForwardOutput(probs=torch.stack(probs), acts=acts)  # type: ignore[arg-type]


def _continue(
    model: AuditModel, cache, shared: int, suffixes: list[list[int]], labels: Sequence[int] | None,
    layers: Sequence[int],
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """One right-padded batch of continuations after the cached prefix: label probabilities and block outputs at
    each row's last real token (causal attention keeps the padding after it invisible)."""
    ids, mask = pad(suffixes, model.tokenizer.pad_token_id, left=False)
    ids, mask = ids.to(model.device), mask.to(model.device)
    rows, width = ids.shape
    if cache is not None:
        cache = copy.deepcopy(cache)
        cache.batch_repeat_interleave(rows)
    attention = torch.cat([torch.ones(rows, shared, dtype=mask.dtype, device=mask.device), mask], dim=1)
    positions = (shared + torch.arange(width, device=ids.device)).expand(rows, width)
    last = mask.sum(1) - 1
    saved: dict[int, torch.Tensor] = {}
    blocks, hooks = architectures.blocks(model.hf), []
    try:
        for layer in layers:
            hooks.append(blocks[layer].register_forward_hook(
                lambda module, args, output, layer=layer: saved.__setitem__(layer, _at(hidden(output), last))
            ))
        out = architectures.decoder(model.hf)(input_ids=ids, attention_mask=attention, position_ids=positions,
                                              past_key_values=cache, use_cache=cache is not None)
    finally:
        for hook in hooks:
            hook.remove()
    unembedded = not activations_only(labels, layers)
    logits = architectures.unembedding(model.hf)(_at(out.last_hidden_state, last)) if unembedded else None
    return readout(logits, labels, [saved[layer] for layer in layers])


def _at(h: torch.Tensor, last: torch.Tensor) -> torch.Tensor:
    """Row i of (rows, tokens, width) hidden states at token `last[i]`, on the device `h` is on."""
    return h[torch.arange(len(h), device=h.device), last.to(h.device)]
