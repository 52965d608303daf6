"""Prompts packed as token trees: the prompts of one batch row that begin alike (the variants of one case, the
questions about one context) hold each distinct token once, and a tree attention mask lets every token attend only
to its own prompt's earlier tokens, its ancestors in the tree. Position ids are each token's depth in its prompt, so
every prompt is computed exactly as on its own, with its shared beginnings run once whatever their nesting (a
context shared by four questions, a sentence shared by two of them). This is the tree attention of speculative
decoding's verification step (Miao et al. 2024, "SpecInfer", section 4.2, "tree-based parallel decoding").
Sharing a row has a price: each token attends over the whole row (masked), so prompts join a row only while that
costs less than running them apart (`pack`, with the model's `attention_cost`).

A model whose sliding window is shorter than its prompts cannot take a tree mask (the window would have to be laid
over it per block kind); its prompts are packed one per row under the usual padding mask. Rows are right-padded:
the padding comes after every real token, so it never sits between a cached beginning and a row."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

import numpy as np
import torch
from tqdm import tqdm

from llmaudit.models.loading import architectures
from llmaudit.models.memory import ROW_TOKENS
from llmaudit.models.passes.batching import token_batches

if TYPE_CHECKING:
    from transformers import PreTrainedModel

T = TypeVar("T")


@dataclass(frozen=True)
class Row:
    """Prompts (their indices) packed in one row: their distinct tokens, each after its parent (-1: a prompt's
    first token), and each prompt's tokens as indices into them, in order."""

    members: tuple[int, ...]
    tokens: tuple[int, ...]
    parents: tuple[int, ...]
    paths: tuple[tuple[int, ...], ...]

    @classmethod
    def of(cls, members: Sequence[int], prompts: Sequence[Sequence[int]]) -> Row:
        """The token tree of `prompts` at `members`."""
        index: dict[tuple[int, int], int] = {}
        tokens: list[int] = []
        parents: list[int] = []
        paths: list[tuple[int, ...]] = []
        for i in members:
            node, path = -1, []
            for token in prompts[i]:
                if (node, token) not in index:
                    index[node, token] = len(tokens)
                    tokens.append(token)
                    parents.append(node)
                node = index[node, token]
                path.append(node)
            paths.append(tuple(path))
        return cls(tuple(members), tuple(tokens), tuple(parents), tuple(paths))

    def depths(self) -> list[int]:
        """Each token's position in its prompts (they all have it at the same one)."""
        depth: list[int] = []
        for parent in self.parents:
            depth.append(0 if parent < 0 else depth[parent] + 1)
        return depth

    def ancestry(self) -> np.ndarray:
        """(tokens, tokens): [k, j] whether token k attends to token j, i.e. j is k or one of its ancestors."""
        seen = np.zeros((len(self.tokens), len(self.tokens)), dtype=bool)
        for k, parent in enumerate(self.parents):  # a parent precedes its children
            if parent >= 0:
                seen[k] = seen[parent]
            seen[k, k] = True
        return seen


def attention_cost(hf: PreTrainedModel) -> float:
    """What one more key costs a token's attention, relative to the rest of the token's cost in a block, in multiply-
    adds: 2 x query heads x head size (scores and weighted values) against one per weight of the block."""
    config = hf.config
    heads = config.num_attention_heads
    head_size = getattr(config, "head_dim", None) or config.hidden_size // heads
    return 2 * heads * head_size / sum(p.numel() for p in architectures.blocks(hf)[0].parameters())


def pack(prompts: Sequence[Sequence[int]], tree: bool, before: int = 0, attention: float = 0.0,
         row_tokens: int | None = None) -> list[Row]:
    """Rows of prompts: without `tree`, one prompt a row. With it, neighbours in token order share a row while that
    costs less than running them apart, a row of n tokens after `before` cached ones costing n (1 + `attention`
    (before + n)) (every token attends over the whole row, masked), and holds at most `row_tokens` tokens (a longer
    prompt alone). In token order, a prompt adds its tokens beyond the longest beginning it shares with the one
    before it."""
    if not tree:
        return [Row.of((i,), prompts) for i in range(len(prompts))]

    def cost(n: int) -> float:
        return n * (1.0 + attention * (before + n))

    groups: list[list[int]] = []
    size = 0
    for i in sorted(range(len(prompts)), key=lambda i: tuple(prompts[i])):
        grown = size + len(prompts[i]) - (_shared(prompts[groups[-1][-1]], prompts[i]) if groups else 0)
        if groups and cost(grown) - cost(size) < cost(len(prompts[i])) and grown <= (row_tokens or grown):
            groups[-1].append(i)
            size = grown
        else:
            groups.append([i])
            size = len(prompts[i])
    return [Row.of(group, prompts) for group in groups]


def _shared(a: Sequence[int], b: Sequence[int]) -> int:
    """How many beginning tokens `a` and `b` share."""
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


@dataclass
class PackedBatch:
    """Rows of packed prompts as one right-padded batch. `members`: the prompts in readout order (row by row);
    `where`: (rows, columns) of each member's last token."""

    rows: list[Row]
    ids: torch.Tensor  # (rows, width)
    depths: torch.Tensor  # (rows, width): each token's position in its prompts, 0 at the padding
    real: torch.Tensor  # (rows, width): 1 at tokens, 0 at the padding
    members: list[int]
    where: tuple[torch.Tensor, torch.Tensor]

    @classmethod
    def of(cls, rows: list[Row], pad_id: int) -> PackedBatch:
        """The batch of `rows`, padded with `pad_id`."""
        width = max(len(row.tokens) for row in rows)
        ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
        depths = torch.zeros((len(rows), width), dtype=torch.long)
        real = torch.zeros((len(rows), width), dtype=torch.long)
        at_row, at_column = [], []
        for r, row in enumerate(rows):
            n = len(row.tokens)
            ids[r, :n] = torch.tensor(row.tokens)
            depths[r, :n] = torch.tensor(row.depths())
            real[r, :n] = 1
            at_row += [r] * len(row.members)
            at_column += [path[-1] for path in row.paths]
        members = [i for row in rows for i in row.members]
        return cls(rows, ids, depths, real, members, (torch.tensor(at_row), torch.tensor(at_column)))

    @property
    def tree(self) -> bool:
        """Whether some row holds more than one prompt (and so needs the tree mask)."""
        return any(len(row.members) > 1 for row in self.rows)

    def attention(self, before: int, device: torch.device | str) -> torch.Tensor:
        """The attention mask over `before` cached tokens that every row sees in full, then the rows: the padding
        mask (rows, before + width) when each row holds one prompt, else the tree mask (rows, 1, width, before +
        width), True where a token attends (padding attends to itself, so that no row of the softmax is empty)."""
        if not self.tree:
            return torch.cat([torch.ones(len(self.rows), before, dtype=torch.long), self.real], dim=1).to(device)
        width = self.ids.shape[1]
        mask = np.zeros((len(self.rows), 1, width, before + width), dtype=bool)
        mask[..., :before] = True
        mask[:, 0, np.arange(width), before + np.arange(width)] = True
        for r, row in enumerate(self.rows):
            n = len(row.tokens)
            mask[r, 0, :n, before : before + n] = row.ancestry()
        return torch.from_numpy(mask).to(device)

    def pick(self, h: torch.Tensor) -> torch.Tensor:
        """Each member's last token of (groups x rows, width, ...) outputs, rows stacked group-major (the lambdas of a
        sweep): (groups x members, ...)."""
        rows, columns = (index.to(h.device) for index in self.where)
        return h.unflatten(0, (-1, len(self.rows)))[:, rows, columns].flatten(0, 1)

    def place(self, states: Sequence[torch.Tensor]) -> torch.Tensor:
        """Per-member states at each of its tokens (tokens, ...), members in order, as the batch's (rows, width, ...)
        tensor, zeros at the padding; a token members share takes the first one's."""
        first = states[0]
        out = first.new_zeros((len(self.rows), self.ids.shape[1], *first.shape[1:]))
        for r, path, state in self._paths(states):
            out[r, path] = state.to(out.device)
        return out

    def unpack(self, h: torch.Tensor) -> list[torch.Tensor]:
        """The batch's (rows, width, ...) outputs as each member's at each of its tokens, members in order."""
        return [h[r, path] for r, path, _ in self._paths(self.members)]

    def _paths(self, items: Sequence[T]) -> Iterator[tuple[int, torch.Tensor, T]]:
        """(row, columns of the member's tokens, item) per member and its item, members in order."""
        k = 0
        for r, row in enumerate(self.rows):
            for path in row.paths:
                yield r, torch.tensor(path), items[k]
                k += 1


def window_covers(hf: PreTrainedModel, length: int) -> bool:
    """Whether every block attends over `length` tokens. Engines that pad inside a sequence (after a shared beginning)
    or lay their own mask over the model's need it: a sliding window shorter than the sequence would count the
    padding, or be left out."""
    window = getattr(hf.config, "sliding_window", None)
    return window is None or length <= window


def packed_batches(hf: PreTrainedModel, prompts: Sequence[Sequence[int]], pad_id: int, batch_tokens: int,
                   before: int = 0, tree: bool = True, desc: str | None = None,
                   only: Sequence[int] | None = None) -> Iterator[PackedBatch]:
    """The prompts (continuations of `before` cached tokens; `only` these of them, members still numbered in
    `prompts`) packed for model `hf` (`pack`: token trees, at the model's `attention_cost`, where asked and its window
    covers the whole prompts; rows within the budget and `memory.ROW_TOKENS`) in token-budgeted batches of rows
    (`token_batches`, longest rows first), with a progress bar over prompts when `desc` is given."""
    index = list(range(len(prompts))) if only is None else list(only)
    chosen = [prompts[i] for i in index]
    tree = tree and window_covers(hf, before + max(len(p) for p in chosen))
    rows = pack(chosen, tree, before, attention_cost(hf) if tree else 0.0, min(batch_tokens, ROW_TOKENS))
    order = sorted(range(len(rows)), key=lambda r: -len(rows[r].tokens))
    with tqdm(total=len(chosen), desc=desc, disable=desc is None, leave=False) as bar:
        for batch in token_batches(order, [len(row.tokens) for row in rows], batch_tokens):
            packed = PackedBatch.of([rows[r] for r in batch], pad_id)
            packed.members = [index[m] for m in packed.members]
            yield packed
            bar.update(len(packed.members))
