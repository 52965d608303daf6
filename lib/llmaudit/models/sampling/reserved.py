"""A key/value cache with room reserved for the tokens a decode adds: each step writes its keys and values in place.
transformers' `DynamicLayer` concatenates instead, a copy of the layer's whole cache per generated token, which on a
CPU took a fifth of a sampled chapter's time (`benchmarks/sampling.py`). Caches of several prefills join into one,
left-padded, so that their answers decode as one batch."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

import torch
from transformers.cache_utils import Cache, DynamicLayer

from llmaudit.models.passes.required import required


class ReservedLayer(DynamicLayer):
    """A `DynamicLayer` whose keys and values are views of buffers with room for more positions than they hold. The
    sampler uses `update` and `batch_select_indices`, the two a decode loop asks of a layer."""

    def __init__(self, keys: torch.Tensor, values: torch.Tensor, length: int) -> None:
        """Hold the first `length` positions of buffers `keys` and `values` (batch, heads, positions, width)."""
        super().__init__()
        self.dtype, self.device, self.is_initialized = keys.dtype, keys.device, True
        self.length = length
        self._buffers = (keys, values)
        self._show()

    @classmethod
    def joined(cls, layers: Sequence[DynamicLayer], room: int) -> ReservedLayer:
        """The layers' rows, in order, with `room` positions more than the longest holds: each layer's positions
        end where the longest's do, zeros before them (padding its mask must hide)."""
        length = max(layer.get_seq_length() for layer in layers)
        keys, values = (left_padded([getattr(layer, name) for layer in layers], length + room)
                        for name in ("keys", "values"))
        return cls(keys, values, length)

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any,
               **kwargs: Any) -> tuple[torch.Tensor, torch.Tensor]:
        """Write the new positions after the held ones and return the keys and values held (views, no copy)."""
        end = self.length + key_states.shape[-2]
        if end > self._buffers[0].shape[-2]:
            raise ValueError(f"the reserved cache holds {self._buffers[0].shape[-2]} positions, {end} asked for")
        for buffer, new in zip(self._buffers, (key_states, value_states)):
            buffer[..., self.length: end, :] = new
        self.length = end
        return self._show()

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        """Keep the rows `indices` (a copy of the buffers' rows, room included)."""
        keys, values = (buffer[indices] for buffer in self._buffers)
        self._buffers = (keys, values)
        self._show()

    def _show(self) -> tuple[torch.Tensor, torch.Tensor]:
        keys, values = (buffer[..., : self.length, :] for buffer in self._buffers)
        self.keys, self.values = keys, values
        return keys, values


def left_padded(parts: Sequence[torch.Tensor | None], positions: int) -> torch.Tensor:
    """The parts (batch, heads, positions, width) one after another in a zero buffer of `positions` positions, each
    part's positions ending where the longest part's do."""
    present = [required(part, "a prefilled layer's keys and values") for part in parts]
    longest = max(part.shape[-2] for part in present)
    first = present[0]
    buffer = first.new_zeros(sum(len(part) for part in present), first.shape[1], positions, first.shape[-1])
    row = 0
    for part in present:
        buffer[row: row + len(part), :, longest - part.shape[-2]: longest] = part
        row += len(part)
    return buffer


def joinable(cache: Cache) -> bool:
    """Whether every layer of the cache is a full-attention `DynamicLayer`, whose positions can be left-padded:
    sliding-window and other layers drop or transform positions."""
    return all(type(layer) is DynamicLayer for layer in cache.layers)


def reserve(cache: Cache, room: int) -> None:
    """Give the cache's full-attention layers room for `room` more positions; sliding-window and other layers keep
    their own update (they drop or transform positions)."""
    for i, layer in enumerate(cache.layers):
        if type(layer) is DynamicLayer and layer.keys is not None and layer.values is not None:
            cache.layers[i] = ReservedLayer.joined([layer], room)


def joined(caches: Sequence[Cache], room: int) -> Cache:
    """The caches' rows in one cache (the first's object), each layer with room for `room` more positions
    (`ReservedLayer.joined`; each cache's positions end where the longest's do, so its mask is left-padded to
    match). One cache is reserved as it is; several must be `joinable`."""
    if len(caches) == 1:
        reserve(caches[0], room)
        return caches[0]
    if not all(joinable(cache) for cache in caches):
        raise ValueError("only full-attention caches join: prefill a sliding-window model's batch at once")
    first = caches[0]
    for i in range(len(first.layers)):
        first.layers[i] = ReservedLayer.joined([cast(DynamicLayer, cache.layers[i]) for cache in caches], room)
    return first
