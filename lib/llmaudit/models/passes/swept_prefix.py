"""The beginning every prompt of a sweep shares (`models.passes.sweep`), computed once: below the steering block once,
above it once per lambda on its edited output, its key/value caches serving every continuation; and the derivative's
whole prompts (`models.passes.derivative`) put back together from it."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from transformers.cache_utils import Cache

from llmaudit.models.loading import architectures
from llmaudit.models.passes.blocks import running
from llmaudit.models.passes.layers import every_position, reading
from llmaudit.models.passes.prefix import repeat_rows
from llmaudit.models.passes.required import required
from llmaudit.models.vector import SteeringVector

if TYPE_CHECKING:  # importing it at run time would load transformers' modelling code with every chapter
    from transformers import PreTrainedModel


def under_edit(h: torch.Tensor, vector: SteeringVector, lam: float | None, projection: bool) -> torch.Tensor:
    """Hidden states `h` under the edit at `lam` (as they are for None: the model unsteered)."""
    return h if lam is None else vector.intervention(lam, projection)(h)


@dataclass
class SweptPrefix:
    """The beginning every prompt of a sweep shares, computed once: its lower blocks' output and key/value cache,
    and, per lambda, the cache of the upper blocks on its edited output. With no shared beginning (empty), every
    method leaves the batch as it is."""

    hidden: torch.Tensor | None  # (1, p, width): the lower blocks' output on the prefix
    lower_cache: Cache | None  # the prefix's keys and values in the lower blocks
    upper_caches: dict[float | None, Cache]  # lambda -> the prefix's keys and values in every block, edited above
    length: int
    kept: torch.Tensor  # (1, p, width): the output of the block whose states the sweep keeps (empty: none)

    @classmethod
    def run(cls, hf: PreTrainedModel, tokens: list[int], device: str, lower: range, upper: range,
            vector: SteeringVector, lambdas: Sequence[float | None], projection: bool,
            keep: int | None = None) -> SweptPrefix:
        """Compute the shared beginning `tokens` (none: an empty prefix)."""
        if not tokens:
            return cls(None, None, {}, 0, torch.empty(1, 0, hf.config.hidden_size, dtype=hf.dtype))
        ids = torch.tensor([tokens], device=device)
        with torch.inference_mode():
            with running(hf, lower, final_norm=False), \
                    reading(architectures.blocks(hf), ([] if keep is None else [keep]), every_position) as at_keep:
                out = architectures.decoder(hf)(input_ids=ids, use_cache=True)
            caches = {}
            for lam in lambdas:
                with running(hf, upper, final_norm=False):
                    edited = under_edit(out.last_hidden_state, vector, lam, projection)
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
        prefix = required(self.hidden, "the prefix's hidden states")
        return torch.cat([prefix.expand(len(hidden), -1, -1).to(hidden.device), hidden], dim=1)

    def lower(self, rows: int) -> Cache | None:
        """The prefix's lower cache for `rows` continuations (views of it)."""
        return repeat_rows([required(self.lower_cache, "the prefix's lower cache")], rows) if self.cached else None

    def upper(self, lambdas: Sequence[float | None], rows: int, blocks: range) -> Cache | None:
        """The prefix's caches at `lambdas`, stacked as the continuations are (lambda-major), `rows` each; they
        differ in the upper `blocks` only."""
        if not self.cached:
            return None
        return repeat_rows([self.upper_caches[lam] for lam in lambdas], rows, blocks)
