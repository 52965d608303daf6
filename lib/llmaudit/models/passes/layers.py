"""Decoder blocks return a tensor in transformers 5 and a tuple in earlier releases; read and write the
hidden state through these two functions so that no caller silently takes `output[0]` (batch row 0); read block
outputs during a forward with `reading`."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import torch


def hidden(output: Any) -> torch.Tensor:
    """The residual-stream tensor (batch, tokens, width) of a block's output."""
    return output[0] if isinstance(output, tuple) else output


def with_hidden(output: Any, value: torch.Tensor) -> Any:
    """The block output with its residual stream replaced by `value`, in the block's own output type."""
    return (value, *output[1:]) if isinstance(output, tuple) else value


def every_position(h: torch.Tensor) -> torch.Tensor:
    """A `reading` pick: the residual stream at every position, as it is."""
    return h


def at_rows(h: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """Row i of (rows, tokens, width) hidden states at token `index[i]` (e.g. each row's last real token), on the
    device `h` is on."""
    return h[torch.arange(len(h), device=h.device), index.to(h.device)]


@contextmanager
def reading(blocks: Sequence[torch.nn.Module], layers: Iterable[int],
            pick: Callable[[torch.Tensor], torch.Tensor]) -> Iterator[dict[int, torch.Tensor]]:
    """While open, each block in `layers` stores `pick` of its residual stream (e.g. the last token's) in the dict
    this yields, under its index, every time it runs; the hooks are removed on leaving."""
    read: dict[int, torch.Tensor] = {}
    hooks = [blocks[layer].register_forward_hook(
        lambda module, args, output, layer=layer: read.__setitem__(layer, pick(hidden(output)))) for layer in layers]
    try:
        yield read
    finally:
        for hook in hooks:
            hook.remove()
