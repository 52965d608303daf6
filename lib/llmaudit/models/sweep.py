"""The steering-sweep engine: answer probabilities of many prompts under a steering vector at many coefficients.

A sweep's cost is forward passes, and most of a naive sweep is repeated work. Here

* the blocks below the steering layer run once per prompt, not once per lambda: their output does not
  depend on lambda (the edit happens above them);
* the blocks above run once per lambda on the edited hidden states, several lambdas stacked in one batch;
* the beginning every prompt of the call shares (chat template, system prompt, instruction) runs once: below the
  steering layer once, above it once per lambda, its key/value caches serving every continuation;
* after it, prompts that begin alike (the variants of one case, the questions about one context) are packed as
  token trees (`models.packing`), so every beginning they share, at any depth, runs once per block and lambda;
* only each prompt's last position goes through the final norm and the unembedding, and only the answer tokens'
  probabilities are kept.

The split forward reuses the model's own forward (embedding, rotary embedding, masks, decoder blocks), so it is
exactly the model's forward with the edit at the steering layer; `AuditModel.forward` with the same intervention
(the traced forward) is the reference it is tested against (tests/test_sweep_architectures.py). Each part runs with
the blocks of the other part swapped for pass-throughs (by `models.blocks.running`, the one place the model is
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
no token trees (their mask stands in for the model's own window masks). The architectures in
`SUPPORTED` are the ones whose forward was read and tested for this; any other is refused, and the plain steered
forward is its fallback. Models traced remotely cannot be split and use that path. A model spread over devices
(`device_map`) runs as it is: accelerate's hooks move the hidden state to each block's device, and the edit is made
where the steering block left it.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from torch.autograd import forward_ad
from transformers.cache_utils import Cache

from llmaudit.errors import AuditError
from llmaudit.ledger import call_label
from llmaudit.models import architectures
from llmaudit.models.batching import token_batches
from llmaudit.models.blocks import running
from llmaudit.models.intervention import Intervention
from llmaudit.models.layers import every_position, reading
from llmaudit.models.memory import BatchTokens, backing_off, batch_budget
from llmaudit.models.packing import PackedBatch, packed_batches
from llmaudit.models.prefix import repeat_rows, shareable
from llmaudit.models.runtime import AuditModel, edit_key, memory_guard
from llmaudit.models.states import LowerStates, store_states, stored_states
from llmaudit.models.vector import SteeringVector

# `config.model_type`s whose split forward is verified to equal the plain steered forward.
SUPPORTED = frozenset(name for name, layout in architectures.ARCHITECTURES.items() if layout.split)


@dataclass
class SweepOutput:
    """A sweep's results, lambdas in the order asked: answer probabilities (lambdas, texts, labels); the last token's
    block outputs (lambdas, texts, layers, width) when blocks were asked for, the steering block's after its edit;
    the exact d metric / d lambda at lambda = 0 per text when targets were given; the lower states kept when asked."""

    probs: torch.Tensor
    acts: torch.Tensor | None = None
    derivative: torch.Tensor | None = None
    states: LowerStates | None = None


def sweep(
    model: AuditModel,
    texts: Sequence[str],
    labels: Sequence[int],
    vector: SteeringVector,
    lambdas: Sequence[float | None],
    projection: bool = True,
    batch_tokens: BatchTokens = 4096,
    lambda_batch: int = 1,
    desc: str | None = None,
) -> torch.Tensor:
    """Next-token probabilities of `labels` for chat-formatted `texts` steered by `vector` at each lambda (None: the
    model unsteered): a tensor (lambdas, texts, labels), texts in input order (see `sweep_outputs`)."""
    return sweep_outputs(model, texts, labels, vector, lambdas, (), projection, batch_tokens, lambda_batch, desc).probs


def sweep_outputs(
    model: AuditModel,
    texts: Sequence[str],
    labels: Sequence[int],
    vector: SteeringVector,
    lambdas: Sequence[float | None],
    layers: Sequence[int] = (),
    projection: bool = True,
    batch_tokens: BatchTokens = 4096,
    lambda_batch: int = 1,
    desc: str | None = None,
) -> SweepOutput:
    """The probabilities and the last token's outputs of `layers` at each lambda (None: unsteered). Remote models run
    the plain steered forward per lambda; a local model of an architecture outside `SUPPORTED` is refused with an
    AuditError."""
    if model.hf is None:
        outputs = [model.forward(texts, labels, layers, _edit(vector, lam, projection), batch_tokens)
                   for lam in lambdas]
        return SweepOutput(torch.stack([out.probs for out in outputs]),
                           torch.stack([out.acts for out in outputs]) if layers else None)
    return sweep_with_sensitivity(model, texts, labels, vector, lambdas, None, projection, batch_tokens,
                                  lambda_batch, desc, layers)


def sensitivity_at_zero(
    model: AuditModel,
    texts: Sequence[str],
    labels: Sequence[int],
    targets: Sequence[int],
    vector: SteeringVector,
    projection: bool = True,
    batch_tokens: BatchTokens = 4096,
) -> torch.Tensor:
    """Exact d metric / d lambda at lambda = 0 for each text (see `sweep_with_sensitivity`)."""
    return sweep_with_sensitivity(model, texts, labels, vector, (), targets, projection, batch_tokens).derivative


def sweep_with_sensitivity(
    model: AuditModel,
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
    """The sweep's probabilities at each lambda (None: unsteered), the last token's outputs of `layers` when asked
    and, given each text's target answer, the exact d metric / d lambda at lambda = 0 (metric = p[target] / sum(p)
    over `labels`), by one forward-mode derivative (torch.func.jvp) of the upper blocks along the edit's tangent
    k v. The blocks below the steering layer run once per batch for all, the prompts' shared beginning once per call
    (the derivative runs whole prompts above the steering layer); from block `start.block` up only, given the
    texts' lower states there (`models.states`). `keep`: a block at or below the steering block whose states to
    return, for later sweeps of the same texts."""
    hf = model.hf
    if hf is None:
        raise AuditError("the split sweep and exact sensitivities need a local model (not remote tracing)")
    model_type = hf.config.model_type
    if model_type not in SUPPORTED:
        raise AuditError(
            f"the split sweep is not verified for architecture '{model_type}': run the plain steered forward"
            " (AuditModel.forward with intervention=...) instead"
        )
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
        prefix = _Prefix.run(hf, encoded[0][:shared], model.device, lower, upper, vector, lambdas, projection, keep)
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
                        reading(blocks, _listed(keep), every_position) as at_keep:
                    hidden = architectures.decoder(hf)(
                        **inputs, attention_mask=mask, position_ids=positions,
                        past_key_values=prefix.lower(len(packed.rows)), use_cache=prefix.cached).last_hidden_state
                if lambdas:
                    swept = _upper_sweep(hf, hidden, mask, positions, packed, labels, vector, lambdas, projection,
                                         lambda_batch, prefix, layers, read)
            if derivative is not None:
                _derivatives(model, packed.unpack(hidden), batch, prefix, labels, targets, vector, projection,
                             min(budget, whole), derivative)
            # results are written only once the whole batch has run, so a batch that runs out of memory leaves none
            for i, states in zip(batch, packed.unpack(at_keep[keep]) if keep is not None else ()):
                kept[i] = torch.cat([prefix.kept[0], states.to(prefix.kept.device)]).cpu()
            if lambdas:
                probs[:, batch] = swept.probs
                if acts is not None:
                    acts[:, batch] = swept.acts

        whole = batch_budget(hf, model.device, batch_tokens, derivative=True)  # the derivative's whole prompts
        backing_off(len(rest), batch_budget(hf, model.device, batch_tokens, stacked=lambda_batch), plan, run)
    states = LowerStates(keep, kept) if keep is not None else None  # type: ignore[arg-type]
    return SweepOutput(probs, acts, derivative, states)


def sweep_from_stored(
    model: AuditModel,
    texts: Sequence[str],
    labels: Sequence[int],
    vector: SteeringVector,
    lambdas: Sequence[float | None],
    targets: Sequence[int] | None,
    cache: Path | None,
    starts: Iterable[int] = (),
    keep: int | None = None,
    projection: bool = True,
    batch_tokens: BatchTokens = 4096,
    lambda_batch: int = 1,
    desc: str | None = None,
) -> SweepOutput:
    """`sweep_with_sensitivity` of a local model that starts from the texts' states stored in the tensor cache at the
    highest block that has them among `starts`, `keep` and the steering block, at or below the edit; and that keeps
    and stores their states at block `keep` (default: the steering block) when it started below it, for the next
    sweep of the same texts (`models.states`)."""
    keep = vector.layer if keep is None else keep
    start = stored_states(cache, model.identity, texts, {b for b in starts if b <= vector.layer} | {keep, vector.layer})
    keeping = keep if start is None or start.block < keep else None
    swept = sweep_with_sensitivity(model, texts, labels, vector, lambdas, targets, projection, batch_tokens,
                                   lambda_batch, desc, start=start, keep=keeping)
    if swept.states is not None:
        store_states(cache, model.identity, texts, swept.states)
    return swept


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


def _listed(block: int | None) -> list[int]:
    """A block as a list of blocks (none for None)."""
    return [] if block is None else [block]


def _edit(vector: SteeringVector, lam: float | None, projection: bool) -> Intervention | None:
    """The edit at `lam`; None (the model unsteered) for None."""
    return None if lam is None else vector.intervention(lam, projection)


def _edited(h: torch.Tensor, vector: SteeringVector, lam: float | None, projection: bool) -> torch.Tensor:
    """Hidden states `h` under the edit at `lam` (as they are for None)."""
    edit = _edit(vector, lam, projection)
    return h if edit is None else edit(h)


@dataclass
class _Prefix:
    """The beginning every prompt of a sweep shares, computed once: its lower blocks' output and key/value cache,
    and, per lambda, the cache of the upper blocks on its edited output. With no shared beginning (empty), every
    method leaves the batch as it is."""

    hidden: torch.Tensor | None  # (1, p, width): the lower blocks' output on the prefix
    lower_cache: Cache | None  # the prefix's keys and values in the lower blocks
    upper_caches: dict[float | None, Cache]  # lambda -> the prefix's keys and values in every block, edited above
    length: int
    kept: torch.Tensor  # (1, p, width): the output of the block whose states the sweep keeps (empty: none)

    @classmethod
    def run(cls, hf: torch.nn.Module, tokens: list[int], device: str, lower: range, upper: range,
            vector: SteeringVector, lambdas: Sequence[float | None], projection: bool,
            keep: int | None = None) -> _Prefix:
        """Compute the shared beginning `tokens` (none: an empty prefix)."""
        if not tokens:
            return cls(None, None, {}, 0, torch.empty(1, 0, hf.config.hidden_size, dtype=hf.dtype))
        ids = torch.tensor([tokens], device=device)
        with torch.inference_mode():
            with running(hf, lower, final_norm=False), \
                    reading(architectures.blocks(hf), _listed(keep), every_position) as at_keep:
                out = architectures.decoder(hf)(input_ids=ids, use_cache=True)
            caches = {}
            for lam in lambdas:
                with running(hf, upper, final_norm=False):
                    edited = _edited(out.last_hidden_state, vector, lam, projection)
                    above = architectures.decoder(hf)(inputs_embeds=edited, use_cache=True).past_key_values
                caches[lam] = copy.deepcopy(out.past_key_values)
                for block in upper:
                    caches[lam].layers[block] = above.layers[block]
        kept = at_keep[keep] if keep is not None else torch.empty(1, 0, hf.config.hidden_size, dtype=hf.dtype)
        return cls(out.last_hidden_state, out.past_key_values, caches, len(tokens), kept)

    @property
    def cached(self) -> bool:
        """Whether there is a shared beginning."""
        return self.length > 0

    def mask(self, mask: torch.Tensor) -> torch.Tensor:
        """The padding mask of left-padded continuations after the prefix."""
        if not self.cached:
            return mask
        return torch.cat([torch.ones(len(mask), self.length, dtype=mask.dtype, device=mask.device), mask], dim=1)

    def positions(self, positions: torch.Tensor) -> torch.Tensor:
        """Position ids of the whole prompts: the prefix's, then the continuations' after them."""
        if not self.cached:
            return positions
        start = torch.arange(self.length, device=positions.device).expand(len(positions), -1)
        return torch.cat([start, positions + self.length], dim=1)

    def whole(self, hidden: torch.Tensor) -> torch.Tensor:
        """The lower blocks' output of the whole prompts: the prefix's, then the continuations'."""
        if not self.cached:
            return hidden
        return torch.cat([self.hidden.expand(len(hidden), -1, -1).to(hidden.device), hidden], dim=1)

    def lower(self, rows: int) -> Cache | None:
        """The prefix's lower cache for `rows` continuations (views of it)."""
        return repeat_rows([self.lower_cache], rows) if self.cached else None

    def upper(self, lambdas: Sequence[float | None], rows: int, blocks: range) -> Cache | None:
        """The prefix's caches at `lambdas`, stacked as the continuations are (lambda-major), `rows` each; they
        differ in the upper `blocks` only."""
        if not self.cached:
            return None
        return repeat_rows([self.upper_caches[lam] for lam in lambdas], rows, blocks)


def _upper_sweep(
    hf: torch.nn.Module,
    hidden: torch.Tensor,
    mask: torch.Tensor,
    positions: torch.Tensor,
    packed: PackedBatch,
    labels: Sequence[int],
    vector: SteeringVector,
    lambdas: Sequence[float | None],
    projection: bool,
    lambda_batch: int,
    prefix: _Prefix,
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
            edited = torch.cat([_edited(hidden, vector, lam, projection) for lam in group])
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


def _derivatives(
    model: AuditModel,
    hidden: Sequence[torch.Tensor],
    texts: Sequence[int],
    prefix: _Prefix,
    labels: Sequence[int],
    targets: Sequence[int],
    vector: SteeringVector,
    projection: bool,
    batch_tokens: int,
    out: torch.Tensor,
) -> None:
    """Into `out`, d metric / d lambda at lambda = 0 of `texts` given their lower blocks' outputs after the prefix
    (`hidden`, one per text): whole prompts, left-padded in token-budgeted batches."""
    lower = LowerStates(vector.layer, list(hidden))
    order = sorted(range(len(texts)), key=lambda k: -len(hidden[k]))
    for chunk in token_batches(order, [prefix.length + len(h) for h in hidden], batch_tokens):
        states = lower.padded(chunk, 0).to(model.device)
        lengths = torch.tensor([len(hidden[k]) for k in chunk], device=model.device)
        mask = (torch.arange(states.shape[1], device=model.device) >= states.shape[1] - lengths[:, None]).long()
        positions = prefix.positions((mask.cumsum(-1) - 1).clamp(min=0))
        chosen = torch.as_tensor([targets[texts[k]] for k in chunk])
        out[[texts[k] for k in chunk]] = _upper_derivative(model.hf, prefix.whole(states), prefix.mask(mask),
                                                           positions, labels, chosen, vector, projection)


def _upper_derivative(
    hf: torch.nn.Module,
    hidden: torch.Tensor,
    mask: torch.Tensor,
    positions: torch.Tensor,
    labels: Sequence[int],
    chosen: torch.Tensor,
    vector: SteeringVector,
    projection: bool,
) -> torch.Tensor:
    """d metric / d lambda at lambda = 0 of one batch, from the lower blocks' output `hidden`."""
    start = vector.intervention(0.0, projection)(hidden)
    tangent = (vector.k * vector.direction).to(start.device, start.dtype).expand_as(start).contiguous()

    def metric(h: torch.Tensor) -> torch.Tensor:
        logits = hf(inputs_embeds=h, attention_mask=mask, position_ids=positions, use_cache=False,
                    logits_to_keep=1).logits
        probs = torch.softmax(logits[:, -1, list(labels)].float(), dim=-1)
        return probs.gather(-1, chosen.to(probs.device).unsqueeze(-1)).squeeze(-1)

    upper = range(vector.layer + 1, hf.config.num_hidden_layers)
    with running(hf, upper, eager_attention=True), torch.no_grad():
        if _offloaded(hf):
            with forward_ad.dual_level():
                derivative = forward_ad.unpack_dual(metric(forward_ad.make_dual(start, tangent))).tangent
        else:
            _, derivative = torch.func.jvp(metric, (start,), (tangent,))
    return derivative.cpu()


def _offloaded(hf: torch.nn.Module) -> bool:
    """Whether accelerate loads some weights in each forward (`device_map` offloading to cpu or disk). It cannot
    inside torch.func.jvp (tensors made in a torch.func transform have no storage), so such a model takes the
    derivative with autograd's forward mode: the same derivative, equal to the last bits or nearly."""
    return any(getattr(getattr(module, "_hf_hook", None), "offload", False) for module in hf.modules())
