"""Prompts that share beginnings (few-shot demonstrations, one instruction, the variants of one case): each shared
beginning runs once and its key/value cache serves every continuation, so a 9-shot prompt costs little more than a
zero-shot one, and the two gender variants of a case little more than one.

The beginning *every* prompt of a call shares (chat template, system prompt, instruction) runs once for the call, and
its cache serves every row. After it, the forward packs the prompts as token trees (`models.passes.packing`): prompts
that go on alike share one row, in which each token they share runs once. The sampler, which needs a cache per prompt,
shares one level instead: runs of neighbours in token order that go on alike for at least `MIN_BRANCH` more tokens form
a
*branch*, run once, left-padded after the common beginning, whose cache each member's own tokens continue.

The splits are made on token ids, so every prompt is tokenised exactly as on its own, and the results equal the
traced forward (`AuditModel.forward(..., traced=True)`), which the tests check."""

from __future__ import annotations

import copy
from collections.abc import Iterable, Iterator, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import torch
from transformers.cache_utils import CacheLayerMixin, DynamicLayer

from llmaudit.ledger import call_label
from llmaudit.models.loading import architectures
from llmaudit.models.memory import BatchTokens, backing_off, batch_budget
from llmaudit.models.passes.batching import ForwardOutput, activations_only, memory_guard, pad, readout
from llmaudit.models.passes.blocks import running
from llmaudit.models.passes.handle import Handle
from llmaudit.models.passes.layers import every_position, reading
from llmaudit.models.passes.packing import PackedBatch, packed_batches, window_covers
from llmaudit.models.passes.required import required

if TYPE_CHECKING:
    from transformers import PreTrainedModel
    from transformers.cache_utils import Cache

# Fewest tokens a sampler branch's prompts share beyond the common beginning: shorter ones cost a forward call for
# too little.
MIN_BRANCH = 4


def common_prefix(encoded: Sequence[Sequence[int]]) -> int:
    """Length of the longest token prefix all sequences share, leaving each at least one token of its own."""
    shortest = min(len(e) for e in encoded)
    n = 0
    while n < shortest - 1 and all(e[n] == encoded[0][n] for e in encoded):
        n += 1
    return n


def shareable(hf: PreTrainedModel, encoded: Sequence[Sequence[int]], extra: int = 0) -> int:
    """How many beginning tokens every prompt shares, for engines that run them once and left-pad the prompts' own
    tokens after them (the sweep, sampling); none when the model's window does not cover the padded prompts (plus
    `extra` tokens generated after them)."""
    return common_prefix(encoded) if window_covers(hf, max(len(e) for e in encoded) + extra) else 0


def repeat_rows(caches: Sequence[Cache], rows: int, differing: Iterable[int] = ()) -> Cache:
    """One cache whose batch holds each of `caches` (batch 1) `rows` times, in order. Only the blocks `differing`
    between the caches are copied; every other block is the same in all of them and becomes a view of the first's, as
    a pass that extends a block concatenates its keys anyway and a block it does not run only tells the cache's
    length. The originals stay as they are."""
    differing = set(differing) if len(caches) > 1 else set()
    stacked = copy.copy(caches[0])
    stacked.layers = [copy.copy(layer) for layer in caches[0].layers]
    for block, layer in enumerate(stacked.layers):
        if not isinstance(layer, CacheLayerMixin):  # a linear-attention or dummy block holds no keys and values
            raise TypeError(f"cannot stack a cache block of type {type(layer).__name__}: keys and values only")
        if not layer.is_initialized:  # a block the beginning did not run
            continue
        for name in ("keys", "values"):
            if block in differing:
                parts = [getattr(cache.layers[block], name) for cache in caches]
                setattr(layer, name, torch.cat(parts).repeat_interleave(rows, dim=0))
            else:
                shared = getattr(layer, name)
                setattr(layer, name, shared.expand(len(caches) * rows, *shared.shape[1:]))
    return stacked


@dataclass(frozen=True)
class Branch:
    """Prompts (their indices) whose continuations after the common beginning share their first `length` tokens."""

    members: tuple[int, ...]
    length: int


def branches(rest: Sequence[list[int]], shortest: int = MIN_BRANCH) -> list[Branch]:
    """Runs of continuations, in token order, sharing at least `shortest` beginning tokens (each keeping one token of
    its own). A run grows while the next continuation's joining saves tokens overall: m members sharing l tokens save
    l (m - 1). Continuations in no run are left out."""
    found: list[Branch] = []
    members: list[int] = []
    length = 0
    for i in sorted(range(len(rest)), key=lambda i: rest[i]):
        if members:
            joined = min(length, common_prefix([rest[members[0]], rest[i]]))
            if joined >= shortest and joined * len(members) >= length * (len(members) - 1):
                members.append(i)
                length = joined
                continue
            if len(members) > 1:
                found.append(Branch(tuple(members), length))
        members, length = [i], len(rest[i]) - 1
    if len(members) > 1:
        found.append(Branch(tuple(members), length))
    return found


def forward_shared_prefix(
    model: Handle,
    texts: Sequence[str],
    labels: Sequence[int] | None,
    layers: Sequence[int] = (),
    batch_tokens: BatchTokens = 4096,
    desc: str | None = None,
    tree: bool = True,
    keep: Sequence[int] = (),
) -> ForwardOutput:
    """Label probabilities (over the whole vocabulary when `labels` is None) and activations of chat-
    formatted texts, the common beginning computed once and, with `tree`, the prompts after it packed as token trees
    (`models.passes.packing`: every beginning some of them share runs once); when no label is read, no block above the
    deepest layer read. Equal to the traced forward (`AuditModel.forward`), which remote models take. `keep`: blocks
    whose outputs at every token to return (`states`, a local model's only), for a sweep of the same texts to start
    from."""
    encoded = model.encode(texts)
    shared = common_prefix(encoded)
    rest = [e[shared:] for e in encoded]
    probs: list[torch.Tensor | None] = [None] * len(texts)
    acts = torch.empty(len(texts), len(layers), model.width) if layers else None
    states: dict[int, list[torch.Tensor | None]] = {block: [None] * len(texts) for block in keep}
    depth = max([*layers, *keep]) + 1 if activations_only(labels, layers) else model.n_layers
    upper_skipped = running(model.hf, range(depth), final_norm=False) if depth < model.n_layers else nullcontext()
    accounted = model.ledger.account(encoded, depth, label=call_label("prefix", desc))
    budget = batch_budget(model.hf, model.device, batch_tokens)

    def plan(left: list[int], budget: int) -> Iterator[tuple[list[int], PackedBatch]]:
        for packed in packed_batches(model.hf, rest, model.tokenizer.pad_token_id, budget, shared, tree, desc, left):
            yield packed.members, packed

    def run(packed: PackedBatch, budget: int) -> None:
        p, a, s = _continue(model, start.repeated(len(packed.rows)), packed, labels, layers)
        for k, i in enumerate(packed.members):
            probs[i] = p[k]
            for block in keep:
                states[block][i] = s[block][k]
        if acts is not None:
            acts[packed.members] = required(a, "block outputs")

    with torch.inference_mode(), memory_guard(batch_tokens), accounted, upper_skipped:
        start = Past.beginning(model, encoded[0][:shared], keep)
        backing_off(len(rest), budget, plan, run)
    return ForwardOutput(probs=torch.stack(probs), acts=acts, states=states or None)  # type: ignore[arg-type]


@dataclass
class Past:
    """What a batch of continuations attends to: a key/value cache (None: nothing) and its attention mask, one row
    per continuation (zeros where a row's cache holds padding), and the outputs of the blocks whose states are
    kept (block -> (rows, length, width)), aligned with the mask."""

    cache: Cache | None
    mask: torch.Tensor
    states: dict[int, torch.Tensor] = field(default_factory=dict)

    @classmethod
    def beginning(cls, model: Handle, tokens: list[int], keep: Sequence[int] = ()) -> Past:
        """The common beginning, run once (batch 1), keeping the outputs of blocks `keep`."""
        if not tokens:
            return cls(None, torch.ones(1, 0, dtype=torch.long, device=model.device),
                       {block: torch.empty(1, 0, model.width, dtype=model.hf.dtype) for block in keep})
        ids = torch.tensor([tokens], device=model.device)
        with reading(architectures.blocks(model.hf), keep, every_position) as seen:
            cache = architectures.decoder(model.hf)(input_ids=ids, use_cache=True).past_key_values
        return cls(cache, torch.ones(1, len(tokens), dtype=torch.long, device=model.device), dict(seen))

    def repeated(self, rows: int) -> Past:
        """This past for `rows` continuations (views: the original serves later batches)."""
        cache = None if self.cache is None else repeat_rows([self.cache], rows)
        return Past(cache, self.mask.expand(rows, -1), {b: s.expand(rows, -1, -1) for b, s in self.states.items()})

    def cropped(self, length: int) -> Past:
        """The first `length` positions of this past (views: the original is kept), each block's cut by its own
        `crop`. Each position's keys and values depend on those before it only, so they are those a run of the first
        `length` tokens gives."""
        if length == self.mask.shape[1]:
            return self
        cache = None if self.cache is None or not length else repeat_rows([self.cache], len(self.mask))
        for layer in [] if cache is None else cache.layers:
            if not isinstance(layer, DynamicLayer):
                raise TypeError(f"cannot crop a cache block of type {type(layer).__name__}: growing blocks only")
            if layer.is_initialized:
                layer.crop(length - layer.get_seq_length())
        return Past(cache, self.mask[:, :length], {b: s[:, :length] for b, s in self.states.items()})

    def extended(self, model: Handle, tokens: Sequence[int]) -> Past:
        """This past (one row) followed by `tokens`, run after it, keeping the outputs of the blocks it keeps (the
        original is kept)."""
        if self.cache is None:
            return Past.beginning(model, list(tokens), list(self.states))
        if not tokens:
            return self
        start = self.mask.shape[1]
        ids = torch.tensor([list(tokens)], device=model.device)
        positions = torch.arange(start, start + len(tokens), device=model.device)[None]
        with reading(architectures.blocks(model.hf), list(self.states), every_position) as seen:
            cache = architectures.decoder(model.hf)(input_ids=ids, position_ids=positions, use_cache=True,
                                                    past_key_values=self.repeated(1).cache).past_key_values
        mask = torch.ones(1, start + len(tokens), dtype=self.mask.dtype, device=self.mask.device)
        return Past(cache, mask, {b: torch.cat([s, seen[b].to(s.device)], dim=1) for b, s in self.states.items()})

    def branched(self, model: Handle, of_rows: Sequence[Branch | None], rest: Sequence[Sequence[int]]) -> Past:
        """This past extended, per row, by its branch (None: none, all padding): the batch's distinct branches run
        once, left-padded after it, and each row takes its branch's cache and mask."""
        if not any(of_rows):
            return self.repeated(len(of_rows))
        distinct = list(dict.fromkeys(of_rows))
        ids, own = pad([[] if b is None else list(rest[b.members[0]][: b.length]) for b in distinct],
                       model.tokenizer.pad_token_id)
        past = self.repeated(len(distinct))
        mask = torch.cat([past.mask, own.to(past.mask.device)], dim=1)
        positions = past.mask.sum(1, keepdim=True) + (own.cumsum(-1) - 1).clamp(min=0).to(mask.device)
        with reading(architectures.blocks(model.hf), list(self.states), every_position) as seen:
            cache = architectures.decoder(model.hf)(input_ids=ids.to(model.device), attention_mask=mask,
                                                    position_ids=positions, past_key_values=past.cache,
                                                    use_cache=True).past_key_values
        slot = {b: k for k, b in enumerate(distinct)}
        where = torch.tensor([slot[b] for b in of_rows], device=mask.device)
        cache.batch_select_indices(where)
        states = {b: torch.cat([s, seen[b].to(s.device)], dim=1)[where] for b, s in past.states.items()}
        return Past(cache, mask[where], states)


def _continue(
    model: Handle, past: Past, packed: PackedBatch, labels: Sequence[int] | None, layers: Sequence[int],
) -> tuple[torch.Tensor, torch.Tensor | None, dict[int, list[torch.Tensor]]]:
    """One packed batch of continuations after their past (the common beginning, whole in every row): label
    probabilities and block outputs at each member's last token, and per kept block each member's whole states
    (its tokens, width), on the CPU."""
    attention = packed.attention(past.mask.shape[1], model.device)
    blocks = architectures.blocks(model.hf)
    with reading(blocks, layers, packed.pick) as saved, reading(blocks, list(past.states), every_position) as seen:
        out = architectures.decoder(model.hf)(input_ids=packed.ids.to(model.device), attention_mask=attention,
                                              position_ids=packed.depths.to(model.device) + past.mask.shape[1],
                                              past_key_values=past.cache, use_cache=past.cache is not None)
    unembedded = not activations_only(labels, layers)
    logits = architectures.unembedding(model.hf)(packed.pick(out.last_hidden_state)) if unembedded else None
    probs, acts = readout(logits, labels, [saved[layer] for layer in layers])
    states = {b: [torch.cat([before[0], own.to(before.device)]).cpu() for own in packed.unpack(seen[b])]
              for b, before in past.states.items()}
    return probs, acts, states
