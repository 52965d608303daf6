"""A key/value cache with room reserved for the tokens a decode adds: each step writes its keys and values in place.
transformers' `DynamicLayer` concatenates instead, a copy of the layer's whole cache per generated token, which on a
CPU took a fifth of a sampled chapter's time (`benchmarks/sampling.py`)."""

from __future__ import annotations

from typing import Any

import torch
from transformers.cache_utils import Cache, DynamicLayer


class ReservedLayer(DynamicLayer):
    """A `DynamicLayer` whose keys and values are views of buffers with `room` positions more than they hold. The
    sampler uses `update` and `batch_select_indices`, the two a decode loop asks of a layer."""

    def __init__(self, keys: torch.Tensor, values: torch.Tensor, room: int) -> None:
        super().__init__()
        self.dtype, self.device, self.is_initialized = keys.dtype, keys.device, True
        self.length = keys.shape[-2]
        self._buffers = tuple(_with_room(t, room) for t in (keys, values))
        self._show()

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
        self._buffers = tuple(buffer[indices] for buffer in self._buffers)
        self._show()

    def _show(self) -> tuple[torch.Tensor, torch.Tensor]:
        keys, values = (buffer[..., : self.length, :] for buffer in self._buffers)
        self.keys, self.values = keys, values
        return keys, values


def _with_room(states: torch.Tensor, room: int) -> torch.Tensor:
    """`states` (batch, heads, positions, width) copied into a buffer with `room` more positions."""
    batch, heads, positions, width = states.shape
    buffer = states.new_empty(batch, heads, positions + room, width)
    buffer[..., :positions, :] = states
    return buffer


def reserve(cache: Cache, room: int) -> None:
    """Give the cache's full-attention layers room for `room` more positions; sliding-window and other layers keep
    their own update (they drop or transform positions)."""
    for i, layer in enumerate(cache.layers):
        if type(layer) is DynamicLayer and layer.keys is not None and layer.values is not None:
            cache.layers[i] = ReservedLayer(layer.keys, layer.values, room)
