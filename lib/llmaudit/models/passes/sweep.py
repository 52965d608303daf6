"""The steering-sweep engine: answer probabilities of many prompts under a steering vector at many coefficients.

A sweep's cost is forward passes, and most of a naive sweep is repeated work. Here

* the blocks below the steering layer run once per prompt, not once per lambda: their output does not
  depend on lambda (the edit happens above them);
* the blocks above run once per lambda on the edited hidden states, several lambdas stacked in one batch;
* the beginning every prompt of the call shares (chat template, system prompt, instruction) runs once: below the
  steering layer once, above it once per lambda, its key/value caches serving every continuation;
* after it, prompts that begin alike (the variants of one case, the questions about one context) are packed as
  token trees (`models.passes.packing`), so every beginning they share, at any depth, runs once per block and lambda;
* only each prompt's last position goes through the final norm and the unembedding, and only the answer tokens'
  probabilities are kept.

The split forward reuses the model's own forward (embedding, rotary embedding, masks, decoder blocks), so it is
exactly the model's forward with the edit at the steering layer; the plain hooked forward (`models.passes.plain`) and
`AuditModel.forward` with the same intervention (the traced forward) are the references it is tested against
(tests/test_conformance.py, tests/test_sweep_architectures.py). Each part runs with
the blocks of the other part swapped for pass-throughs (by `models.passes.blocks.running`, the one place the model is
edited, undone on any exception), not cut out of the layer list, because some models pick a block's attention mask
and rotary embedding by its position in the loop over `layers`: Qwen2, Ministral and Gemma 3 index
`config.layer_types[i]` with the loop counter `i` to choose between the sliding-window and the global mask (and, in
Gemma 3, between the local and the global rotary embedding), so a block run from a shortened list would get the mask
of another block. Llama and Mistral give every block the same mask. Gemma 3 scales the token embeddings inside its
embedding module, so the edited hidden states passed as `inputs_embeds` are not rescaled. The only key/value caches
are the shared beginning's: the lower one from the lower run, and per lambda one whose upper blocks come from the
upper run on the edited beginning, so that every block of the cache holds the beginning (a model reads the cache's
length from its first block). The derivative runs whole prompts, left-padded after the beginning, so a model whose
sliding window is shorter than the prompts shares no beginning (the padding would count inside its window) and packs
no token trees (their mask stands in for the model's own window masks). The families in
`architectures.FAST` are the ones whose forward was read and tested for this (tests/test_conformance.py); every other
runs the plain hooked forward (`models.passes.plain`): `models.engines.choose` picks the engine. Models traced remotely
cannot be split and use the traced forward. A model spread over devices
(`device_map`) runs as it is: accelerate's hooks move the hidden state to each block's device, and the edit is made
where the steering block left it.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from llmaudit.ledger import call_label
from llmaudit.models.intervention import edit_key
from llmaudit.models.loading import architectures
from llmaudit.models.memory import BatchTokens, backing_off, batch_budget
from llmaudit.models.passes.batching import memory_guard
from llmaudit.models.passes.blocks import running
from llmaudit.models.passes.derivative import derivatives
from llmaudit.models.passes.handle import Handle
from llmaudit.models.passes.layers import every_position, reading
from llmaudit.models.passes.packing import PackedBatch, packed_batches
from llmaudit.models.passes.prefix import shareable
from llmaudit.models.passes.required import required
from llmaudit.models.passes.states import LowerStates
from llmaudit.models.passes.swept_prefix import SweptPrefix, under_edit
from llmaudit.models.vector import SteeringVector

if TYPE_CHECKING:
    from transformers import PreTrainedModel



@dataclass
class SweepOutput:
    """A sweep's results, lambdas in the order asked: answer probabilities (lambdas, texts, labels); the last token's
    block outputs (lambdas, texts, layers, width) when blocks were asked for, the steering block's after its edit;
    the exact d metric / d lambda at lambda = 0 per text when targets were given; the lower states kept when asked."""

    probs: torch.Tensor
    acts: torch.Tensor | None = None
    derivative: torch.Tensor | None = None
    states: LowerStates | None = None


def split_sweep(
    model: Handle,
    texts: Sequence[str],
    labels: Sequence[int],
    vector: SteeringVector,
    lambdas: Sequence[float | None],
    targets: Sequence[int] | None,
    projection: bool = True,
    batch_tokens: BatchTokens = 4096,
    lambda_batch: int = 1,
    desc: str | None = None,
    layers: Sequence[int] = (),
    start: LowerStates | None = None,
    keep: int | None = None,
) -> SweepOutput:
    """The sweep's probabilities at each lambda (None: unsteered), the last token's outputs of `layers` when asked and,
    given each text's target answer, the exact d metric / d lambda at lambda = 0 (metric = p[target] / sum(p) over
    `labels`), by one forward-mode derivative (torch.func.jvp) of the upper blocks along the edit's tangent k v
    (`models.passes.derivative`). The blocks below the steering layer run once per batch for all, the prompts' shared
    beginning once per call (the derivative runs whole prompts above the steering layer); from block `start.block` up
    only, given the texts' lower states there (`models.passes.states`). `keep`: a block at or below the steering block
    whose states to return, for later sweeps of the same texts. Callers go through `models.ask.ask`."""
    hf = model.hf
    probs = torch.empty(len(lambdas), len(texts), len(labels))
    acts = torch.empty(len(lambdas), len(texts), len(layers), model.width) if layers else None
    derivative = torch.empty(len(texts)) if targets is not None else None
    encoded = model.encode(texts)
    edits = [edit_key(vector.intervention(lam, projection)) for lam in lambdas if lam is not None]
    edits += [("derivative", *edit_key(vector.intervention(0.0, projection)))] if targets is not None else []
    shared = shareable(hf, encoded)
    rest = [e[shared:] for e in encoded]
    base = 0 if start is None else start.block + 1  # the first block the continuations run
    lower, upper = range(vector.layer + 1), range(vector.layer + 1, hf.config.num_hidden_layers)
    below = [layer for layer in layers if layer < vector.layer]
    _check_states(start, keep, encoded, base, vector.layer, below)
    kept: list[torch.Tensor | None] = [None] * len(texts)
    model.ledger.spare(encoded, base)  # what the given states spare is neither run nor needed
    with memory_guard(batch_tokens), model.ledger.account(encoded, steered=(vector.layer, edits),
                                                          label=call_label("sweep", desc)):
        if None in lambdas:  # the unsteered model needs every block once, as any unsteered forward does
            model.ledger.need(encoded)
        # the beginning runs from its tokens through every lower block, which gives the cache a layer for each
        prefix = SweptPrefix.run(hf, encoded[0][:shared], model.device, lower, upper, vector, lambdas, projection, keep)
        blocks = architectures.blocks(hf)

        def plan(left: list[int], budget: int) -> Iterator[tuple[list[int], PackedBatch]]:
            for packed in packed_batches(hf, rest, model.tokenizer.pad_token_id, budget, shared, desc=desc, only=left):
                yield packed.members, packed

        def run(packed: PackedBatch, budget: int) -> None:
            batch, mask = packed.members, packed.attention(prefix.length, model.device)
            positions = packed.depths.to(model.device) + shared
            inputs = {"input_ids": packed.ids.to(model.device)} if start is None else \
                {"inputs_embeds": packed.place([start.states[i][shared:] for i in batch]).to(model.device, hf.dtype)}
            with torch.inference_mode():
                with running(hf, range(base, vector.layer + 1), final_norm=False), \
                        reading(blocks, below, packed.pick) as read, \
                        reading(blocks, ([] if keep is None else [keep]), every_position) as at_keep:
                    hidden = architectures.decoder(hf)(
                        **inputs, attention_mask=mask, position_ids=positions,
                        past_key_values=prefix.lower(len(packed.rows)), use_cache=prefix.cached).last_hidden_state
                if lambdas:
                    swept = _upper_sweep(hf, hidden, mask, positions, packed, labels, vector, lambdas, projection,
                                         lambda_batch, prefix, layers, read)
            if derivative is not None:
                derivatives(model, packed.unpack(hidden), batch, prefix, labels, required(targets, "targets"), vector,
                            projection, min(budget, whole), derivative)
            # results are written only once the whole batch has run, so a batch that runs out of memory leaves none
            for i, states in zip(batch, packed.unpack(at_keep[keep]) if keep is not None else ()):
                kept[i] = torch.cat([prefix.kept[0], states.to(prefix.kept.device)]).cpu()
            if lambdas:
                probs[:, batch] = swept.probs
                if acts is not None:
                    acts[:, batch] = required(swept.acts, "the sweep's block outputs")

        whole = batch_budget(hf, model.device, batch_tokens, derivative=True)  # the derivative's whole prompts
        backing_off(len(rest), batch_budget(hf, model.device, batch_tokens, stacked=lambda_batch), plan, run)
    states = LowerStates(keep, kept) if keep is not None else None  # type: ignore[arg-type]
    return SweepOutput(probs, acts, derivative, states)

def _check_states(start: LowerStates | None, keep: int | None, encoded: Sequence[Sequence[int]], base: int,
                  layer: int, below: Sequence[int]) -> None:
    """Refuse given states that are not these prompts' below the steering block, and blocks to read or keep that the
    sweep does not run."""
    if start is not None and ([len(s) for s in start.states] != [len(e) for e in encoded] or start.block > layer):
        raise ValueError(f"lower states at block {start.block} are not these prompts' below steering block {layer}")
    if keep is not None and not base <= keep <= layer:
        raise ValueError(f"block {keep} to keep is outside the blocks the sweep runs below the edit, {base}-{layer}")
    if any(b < base for b in below):
        raise ValueError(f"blocks {[b for b in below if b < base]} to read lie below the given states' block")

def _upper_sweep(
    hf: PreTrainedModel,
    hidden: torch.Tensor,
    mask: torch.Tensor,
    positions: torch.Tensor,
    packed: PackedBatch,
    labels: Sequence[int],
    vector: SteeringVector,
    lambdas: Sequence[float | None],
    projection: bool,
    lambda_batch: int,
    prefix: SweptPrefix,
    layers: Sequence[int] = (),
    below: dict[int, torch.Tensor] | None = None,
) -> SweepOutput:
    """The upper blocks on the edited hidden states of a packed batch (continuations of `prefix`), `lambda_batch`
    lambdas per pass: probabilities (lambdas, members, labels) and each member's last token's outputs (lambdas,
    members, layers, width), those of the blocks below the steering block given in `below` (the same at every
    lambda)."""
    probs, acts = [], []
    above = [layer for layer in layers if layer > vector.layer]
    members = len(packed.members)
    upper = range(vector.layer + 1, hf.config.num_hidden_layers)
    with running(hf, upper):
        for start in range(0, len(lambdas), lambda_batch):
            group = lambdas[start : start + lambda_batch]
            edited = torch.cat([under_edit(hidden, vector, lam, projection) for lam in group])
            repeat = len(group)
            with reading(architectures.blocks(hf), above, packed.pick) as read:
                last = architectures.decoder(hf)(
                    inputs_embeds=edited,
                    attention_mask=mask.repeat(repeat, *[1] * (mask.dim() - 1)),
                    position_ids=positions.repeat(repeat, 1),
                    past_key_values=prefix.upper(group, len(hidden), upper),
                    use_cache=prefix.cached,
                ).last_hidden_state
            logits = architectures.unembedding(hf)(packed.pick(last))
            probs.append(torch.softmax(logits.float(), dim=-1)[:, list(labels)].reshape(repeat, members, -1))
            if layers:
                read |= {layer: h.repeat(repeat, 1) for layer, h in (below or {}).items()}
                read[vector.layer] = packed.pick(edited)
                acts.append(torch.stack([read[layer].float().cpu() for layer in layers], dim=1)
                            .reshape(repeat, members, len(layers), -1))
    return SweepOutput(torch.cat(probs).cpu(), torch.cat(acts) if layers else None)
