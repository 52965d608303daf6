"""Prompts that share beginnings (few-shot demonstrations, one instruction, the variants of one case): each shared
beginning runs once and its key/value cache serves every continuation, so a 9-shot prompt costs little more than a
zero-shot one, and the two gender variants of a case little more than one.

Two levels of sharing. The beginning *every* prompt of a call shares (chat template, system prompt, instruction) runs
once for the call. After it, prompts are sorted by their tokens, and runs of neighbours that go on alike for at least
`MIN_BRANCH` more tokens form a *branch* (the variants of one case up to their first differing token, the texts of
one instruction template, the names shown in one profile): each batch runs the branches of its prompts once, left-
padded after the common beginning, and each prompt only its own last tokens, right-padded after its branch.

The splits are made on token ids, so every prompt is tokenised exactly as on its own, and the results equal the
traced forward (`AuditModel.forward(..., traced=True)`), which the tests check."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import torch
from tqdm import tqdm

from llmaudit.ledger import call_label
from llmaudit.models import architectures
from llmaudit.models.blocks import running
from llmaudit.models.layers import at_rows, every_position, reading
from llmaudit.models.batching import ForwardOutput, activations_only, memory_guard, pad, readout, token_batches

if TYPE_CHECKING:
    from transformers.cache_utils import Cache

    from llmaudit.models.runtime import AuditModel

# Fewest tokens a branch's prompts share beyond the common beginning: shorter ones cost a forward call for too little.
MIN_BRANCH = 4


def common_prefix(encoded: Sequence[Sequence[int]]) -> int:
    """Length of the longest token prefix all sequences share, leaving each at least one token of its own."""
    shortest = min(len(e) for e in encoded)
    n = 0
    while n < shortest - 1 and all(e[n] == encoded[0][n] for e in encoded):
        n += 1
    return n


def window_covers(hf: torch.nn.Module, length: int) -> bool:
    """Whether every block attends over `length` tokens. Engines that pad inside a sequence (after a shared beginning)
    need it: a sliding window shorter than the padded sequence would count the padding."""
    window = getattr(hf.config, "sliding_window", None)
    return window is None or length <= window


def shareable(hf: torch.nn.Module, encoded: Sequence[Sequence[int]], extra: int = 0) -> int:
    """How many beginning tokens every prompt shares, for engines that run them once and left-pad the prompts' own
    tokens after them (the sweep, sampling); none when the model's window does not cover the padded prompts (plus
    `extra` tokens generated after them)."""
    return common_prefix(encoded) if window_covers(hf, max(len(e) for e in encoded) + extra) else 0


@dataclass(frozen=True)
class Branch:
    """Prompts (their indices) whose continuations after the common beginning share their first `length` tokens."""

    members: tuple[int, ...]
    length: int


def branches(rest: Sequence[Sequence[int]], shortest: int = MIN_BRANCH) -> list[Branch]:
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
    model: AuditModel,
    texts: Sequence[str],
    labels: Sequence[int] | None,
    layers: Sequence[int] = (),
    batch_tokens: int = 4096,
    desc: str | None = None,
    min_branch: int | None = MIN_BRANCH,
    keep: Sequence[int] = (),
) -> ForwardOutput:
    """Label probabilities (log-probabilities over the vocabulary when `labels` is None) and activations of
    chat-formatted texts, every shared beginning computed once (see the module; `min_branch` None shares only the
    common beginning) and, when no label is read, no block above the deepest layer read; equal to the traced
    forward, which remote models take. `keep`: blocks whose outputs at every token to return (`states`, a local
    model's only), for a sweep of the same texts to start from."""
    if model.hf is None:
        return model.forward(texts, labels, layers, batch_tokens=batch_tokens, desc=desc)
    encoded = model.encode(texts)
    shared = common_prefix(encoded)
    rest = [e[shared:] for e in encoded]
    # a branch is left-padded inside the sequence, which at most doubles its length
    branching = min_branch is not None and window_covers(model.hf, 2 * max(len(e) for e in encoded))
    found = branches(rest, min_branch) if branching else []
    branch_of = {i: b for b in found for i in b.members}
    own = [len(r) - (branch_of[i].length if i in branch_of else 0) for i, r in enumerate(rest)]
    probs: list[torch.Tensor | None] = [None] * len(texts)
    acts = torch.empty(len(texts), len(layers), model.width) if layers else None
    states: dict[int, list[torch.Tensor | None]] = {block: [None] * len(texts) for block in keep}
    depth = max([*layers, *keep]) + 1 if activations_only(labels, layers) else model.n_layers
    upper_skipped = running(model.hf, range(depth), final_norm=False) if depth < model.n_layers else nullcontext()
    accounted = model.ledger.account(encoded, depth, label=call_label("prefix", desc))
    with torch.inference_mode(), memory_guard(batch_tokens), accounted, upper_skipped:
        start = Past.beginning(model, encoded[0][:shared], keep)
        with tqdm(total=len(texts), desc=desc, disable=desc is None, leave=False) as bar:
            for branched in (False, True):  # prompts in no branch, then the branched ones, longest own part first
                order = sorted((i for i in range(len(texts)) if (i in branch_of) == branched), key=lambda i: -own[i])
                # the budget counts each row's tokens after the common beginning: those it computes and, for a
                # branched row, the cached branch it attends to (which bounds the cache copies' memory)
                for batch in token_batches(order, [len(r) for r in rest], batch_tokens, own):
                    past = start.branched(model, [branch_of[i] for i in batch], rest) if branched else \
                        start.repeated(len(batch))
                    p, a, s = _continue(model, past, [rest[i][len(rest[i]) - own[i]:] for i in batch], labels,
                                        layers)
                    for row, i in enumerate(batch):
                        probs[i] = p[row]
                        for block in keep:
                            states[block][i] = s[block][row]
                    if acts is not None:
                        acts[batch] = a
                    bar.update(len(batch))
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
    def beginning(cls, model: AuditModel, tokens: list[int], keep: Sequence[int] = ()) -> Past:
        """The common beginning, run once (batch 1), keeping the outputs of blocks `keep`."""
        if not tokens:
            return cls(None, torch.ones(1, 0, dtype=torch.long, device=model.device),
                       {block: torch.empty(1, 0, model.width, dtype=model.hf.dtype) for block in keep})
        ids = torch.tensor([tokens], device=model.device)
        with reading(architectures.blocks(model.hf), keep, every_position) as seen:
            cache = architectures.decoder(model.hf)(input_ids=ids, use_cache=True).past_key_values
        return cls(cache, torch.ones(1, len(tokens), dtype=torch.long, device=model.device), dict(seen))

    def repeated(self, rows: int) -> Past:
        """This past for `rows` continuations (a copy: the original serves later batches)."""
        cache = copy.deepcopy(self.cache)
        if cache is not None:
            cache.batch_repeat_interleave(rows)
        return Past(cache, self.mask.expand(rows, -1), {b: s.expand(rows, -1, -1) for b, s in self.states.items()})

    def branched(self, model: AuditModel, of_rows: Sequence[Branch | None], rest: Sequence[Sequence[int]]) -> Past:
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
    model: AuditModel, past: Past, suffixes: list[list[int]], labels: Sequence[int] | None, layers: Sequence[int],
) -> tuple[torch.Tensor, torch.Tensor | None, dict[int, list[torch.Tensor]]]:
    """One right-padded batch of continuations after their past: label probabilities and block outputs at each
    row's last real token (causal attention keeps the padding after it invisible), and per kept block of the past
    each row's whole states (its tokens, width), on the CPU."""
    ids, mask = pad(suffixes, model.tokenizer.pad_token_id, left=False)
    ids, mask = ids.to(model.device), mask.to(past.mask.device)
    attention = torch.cat([past.mask, mask], dim=1)
    positions = past.mask.sum(1, keepdim=True) + torch.arange(ids.shape[1], device=mask.device)
    last = mask.sum(1) - 1
    blocks = architectures.blocks(model.hf)
    with reading(blocks, layers, lambda h: at_rows(h, last)) as saved, \
            reading(blocks, list(past.states), every_position) as seen:
        out = architectures.decoder(model.hf)(input_ids=ids, attention_mask=attention, position_ids=positions,
                                              past_key_values=past.cache, use_cache=past.cache is not None)
    unembedded = not activations_only(labels, layers)
    logits = architectures.unembedding(model.hf)(at_rows(out.last_hidden_state, last)) if unembedded else None
    probs, acts = readout(logits, labels, [saved[layer] for layer in layers])
    states = {b: [torch.cat([before[row][past.mask[row].bool().to(before.device)], seen[b][row, : len(suffix)]]).cpu()
                  for row, suffix in enumerate(suffixes)] for b, before in past.states.items()}
    return probs, acts, states
