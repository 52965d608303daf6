"""The sampler's kept answers: for a request marked `followed` (later requests' texts begin as its texts or their
answers do, e.g. chain-of-thought's answer step after its reasoning), each answer row's key/value cache over its
text and the answer tokens the decode ran, so that a later text that begins with some of those tokens runs only the
rest (each position's keys and values depend on the tokens before it only: a prefix of a kept row is what a run of
that prefix gives, up to float rounding).

Bounded: the entries hold at most `limit` bytes (the caller's: one decoding batch's memory), the least recently used
dropped first; all are dropped when any weight of the model has changed in place since they ran. Full-attention
models only (their caches left-pad and join)."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

import torch
from transformers.cache_utils import Cache, DynamicCache, DynamicLayer

from llmaudit.ledger import prefix_hashes
from llmaudit.models.passes.handle import Handle
from llmaudit.models.passes.prefix import Past
from llmaudit.models.passes.required import required
from llmaudit.models.sampling.reserved import left_padded


@dataclass(frozen=True)
class Kept:
    """One answer row's tokens (its text's, then the answer tokens the decode ran) and its keys and values, per
    block a (keys, values) pair of shape (1, heads, tokens, width), holding `token_bytes` bytes a token (the
    planning engine keeps the tokens alone, no blocks, at the bytes the sampler's would hold: `engines.planner`)."""

    tokens: tuple[int, ...]
    blocks: tuple[tuple[torch.Tensor, torch.Tensor], ...]
    token_bytes: int

    @classmethod
    def of(cls, tokens: tuple[int, ...], blocks: tuple[tuple[torch.Tensor, torch.Tensor], ...]) -> Kept:
        """A row's tokens and their keys and values."""
        held = sum(t.numel() * t.element_size() for pair in blocks for t in pair)
        return cls(tokens, blocks, held // max(1, len(tokens)))

    @property
    def bytes(self) -> int:
        return len(self.tokens) * self.token_bytes

    def cut(self, length: int) -> Kept:
        """Its first `length` tokens (views of their keys and values)."""
        return Kept(self.tokens[:length], tuple((k[:, :, :length], v[:, :, :length]) for k, v in self.blocks),
                    self.token_bytes)


class Continuations:
    """The kept answers, least recently used first, with an index from each of their prefixes (its hash, as
    `ledger.prefix_hashes` makes them) to the entries holding it."""

    def __init__(self) -> None:
        self.entries: OrderedDict[tuple[int, ...], Kept] = OrderedDict()
        self.index: dict[int, dict[tuple[int, ...], None]] = {}
        self.held = 0
        self.weights: tuple[int, ...] = ()

    def keep(self, model: Handle, tokens: Sequence[Sequence[int]], cache: Cache, mask: torch.Tensor,
             rows: Sequence[int], limit: int) -> None:
        """Keep the `rows` of `cache` (valid where `mask`, on the CPU, is 1), each as the first len(tokens[k]) of
        its valid positions, for those tokens; the oldest entries leave while all hold over `limit` bytes."""
        for row, ids in zip(rows, tokens):
            where = mask[row].nonzero().squeeze(-1)[: len(ids)].to(model.device)
            blocks = tuple((required(layer.keys, "keys")[row: row + 1, :, where].clone(),
                            required(layer.values, "values")[row: row + 1, :, where].clone())
                           for layer in cast("list[DynamicLayer]", cache.layers))  # full attention's (`full_attention`)
            self.add(model, Kept.of(tuple(ids), blocks), limit)

    def add(self, model: Handle, kept: Kept, limit: int) -> None:
        """Keep one entry; the oldest leave while all hold over `limit` bytes."""
        self._check(model)
        if kept.tokens in self.entries:
            self._drop(kept.tokens)
        self.entries[kept.tokens] = kept
        self.held += kept.bytes
        for h in prefix_hashes(kept.tokens):
            self.index.setdefault(h, {})[kept.tokens] = None
        while self.held > limit and self.entries:
            self._drop(next(iter(self.entries)))

    def take(self, model: Handle, encoded: Sequence[Sequence[int]]) -> list[Kept | None]:
        """Per text, the kept entry holding its longest beginning (all its tokens but its last, at most), cut to
        that beginning (the entry used last); None where no entry holds any of it."""
        self._check(model)
        if not self.entries:
            return [None] * len(encoded)
        found: list[Kept | None] = []
        for ids in encoded:
            # the lengths of its beginnings some entry holds (by their hashes)
            held = [(length, h) for length, h in enumerate(prefix_hashes(ids[:-1]), start=1) if h in self.index]
            best = next(((key, length) for length, h in reversed(held)
                         for key in [next(reversed(self.index[h]))] if key[:length] == tuple(ids[:length])), None)
            if best is None:
                found.append(None)
                continue
            key, length = best
            self.entries.move_to_end(key)
            found.append(self.entries[key].cut(length))
        return found

    def _drop(self, key: tuple[int, ...]) -> Kept:
        kept = self.entries.pop(key)
        self.held -= kept.bytes
        for h in prefix_hashes(key):
            holders = self.index[h]
            del holders[key]
            if not holders:
                del self.index[h]
        return kept

    def _check(self, model: Handle) -> None:
        """Drop everything when a weight has changed in place since the entries ran."""
        weights = model.weight_versions()
        if weights != self.weights:
            self.entries.clear()
            self.index.clear()
            self.held, self.weights = 0, weights


def past_of(model: Handle, found: Sequence[Kept]) -> Past:
    """The entries' keys and values as one past, a row each, left-padded to the longest (its mask 0 there)."""
    longest = max(len(kept.tokens) for kept in found)
    blocks = len(found[0].blocks)
    cache = DynamicCache(ddp_cache_data=[
        tuple(left_padded([kept.blocks[b][i] for kept in found], longest) for i in (0, 1)) for b in range(blocks)])
    mask = torch.zeros(len(found), longest, dtype=torch.long, device=model.device)
    for row, kept in enumerate(found):
        mask[row, longest - len(kept.tokens):] = 1
    return Past(cache, mask)
