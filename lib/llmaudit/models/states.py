"""Lower states: the output of one decoder block at every token of some prompts, what the blocks above it need and
nothing more. A steering sweep keeps them at the lowest block any vector of the concept steers, and a later sweep of
the same prompts along another vector of the concept (or the same vector with another edit) starts from them instead
of running the blocks below again, in this chapter or, through the tensor cache, in another.

The states are of each prompt's tokens after the beginning all the prompts share (which a sweep runs once, cheaply,
from its tokens), so a set of states belongs to its prompts exactly as the sweep that kept them split them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch


@dataclass
class LowerStates:
    """Per prompt, block `block`'s output (tokens, width) at the prompt's tokens after the shared beginning of
    `shared` tokens."""

    block: int
    shared: int
    own: list[torch.Tensor]

    def padded(self, rows: Sequence[int]) -> torch.Tensor:
        """The states of prompts `rows` as one left-padded batch (rows, longest, width), zeros at the padding (which
        the attention mask hides)."""
        longest = max(len(self.own[i]) for i in rows)
        batch = torch.zeros(len(rows), longest, self.own[rows[0]].shape[-1], dtype=self.own[rows[0]].dtype)
        for row, i in enumerate(rows):
            batch[row, longest - len(self.own[i]):] = self.own[i]
        return batch

    def tensors(self) -> dict[str, torch.Tensor]:
        """The states as named tensors for the tensor cache (`from_tensors` reads them back)."""
        return {"states": torch.cat(self.own), "lengths": torch.tensor([len(s) for s in self.own]),
                "block": torch.tensor(self.block), "shared": torch.tensor(self.shared)}

    @classmethod
    def from_tensors(cls, tensors: dict[str, torch.Tensor]) -> LowerStates:
        """States saved by `tensors`."""
        own = list(tensors["states"].split(tensors["lengths"].tolist()))
        return cls(int(tensors["block"]), int(tensors["shared"]), own)
