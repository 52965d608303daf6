"""Lower states: the output of one decoder block at every token of some prompts, what the blocks above it need and
nothing more. The forward that first runs a set of prompts (a black-box pass whose prompts a sweep will steer, the
first sweep of a concept) keeps them at the blocks the concept's vectors steer, and a later sweep of the same prompts
(along another vector of the concept, or the same vector with another edit) starts from them instead of running the
blocks below again, in this chapter or, through the tensor cache, in another."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import torch

from llmaudit.cache import Cache, store_tensors, stored_tensors


@dataclass
class LowerStates:
    """Per prompt, block `block`'s output at each of its tokens (tokens, width)."""

    block: int
    states: list[torch.Tensor]

    def padded(self, rows: Sequence[int], start: int) -> torch.Tensor:
        """The states of prompts `rows` from token `start` on, as one left-padded batch (rows, longest, width), zeros
        at the padding (which the attention mask hides)."""
        parts = [self.states[i][start:] for i in rows]
        batch = torch.zeros(len(parts), max(len(p) for p in parts), parts[0].shape[-1], dtype=parts[0].dtype)
        for row, part in enumerate(parts):
            batch[row, batch.shape[1] - len(part):] = part
        return batch

    def tensors(self) -> dict[str, torch.Tensor]:
        """The states as named tensors for the tensor cache (`from_tensors` reads them back)."""
        return {"states": torch.cat(self.states), "lengths": torch.tensor([len(s) for s in self.states]),
                "block": torch.tensor(self.block)}

    @classmethod
    def from_tensors(cls, tensors: dict[str, torch.Tensor]) -> LowerStates:
        """States saved by `tensors`."""
        return cls(int(tensors["block"]), list(tensors["states"].split(tensors["lengths"].tolist())))


def store_states(cache: Cache, identity: dict, texts: Sequence[str], states: LowerStates) -> None:
    """Keep `states` of `texts` (the model's `identity`) in the tensor cache."""
    store_tensors(cache, _key(identity, texts, states.block), states.tensors())


def store_kept(cache: Cache, identity: dict, texts: Sequence[str], kept: dict[int, list[torch.Tensor]] | None,
               wanted: Sequence[str]) -> None:
    """Store the states a forward of `texts` kept (`ForwardOutput.states`, per block) for the texts `wanted` among
    them."""
    where = {text: i for i, text in enumerate(texts)}
    for block, states in (kept or {}).items():
        store_states(cache, identity, wanted, LowerStates(block, [states[where[text]] for text in wanted]))


def stored_states(cache: Cache, identity: dict, texts: Sequence[str],
                  blocks: Iterable[int]) -> LowerStates | None:
    """The stored states of `texts` at the highest of `blocks` that has them; None where none has."""
    for block in sorted(blocks, reverse=True):
        found = stored_tensors(cache, _key(identity, texts, block))
        if found is not None:
            return LowerStates.from_tensors(found)
    return None


def _key(identity: dict, texts: Sequence[str], block: int) -> dict:
    """The tensor-cache key of `texts`' states at `block`."""
    return {"model": identity, "prompts": list(texts), "states": block}
