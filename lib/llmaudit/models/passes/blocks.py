"""Running part of a model: the decoder blocks outside a range swapped for pass-throughs, so that each block kept
keeps its index and gets the mask and position embeddings of the full forward. The sweep runs the blocks below
and above a steering layer apart with it, the prefix cache stops at the deepest block it reads."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import torch

from llmaudit.models.loading import architectures

if TYPE_CHECKING:
    from transformers import PreTrainedModel


class _PassThrough(torch.nn.Module):
    """Stands in for a decoder block that is not run: returns the hidden states it is given."""

    def forward(self, hidden_states: torch.Tensor, *args: object, **kwargs: object) -> torch.Tensor:
        """The input hidden states, unchanged."""
        return hidden_states


@contextmanager
def running(
    hf: PreTrainedModel, kept: range, final_norm: bool = True, eager_attention: bool = False
) -> Iterator[None]:
    """While open, the model's own forward runs only the decoder blocks in `kept`, the others replaced by
    pass-throughs, so that every block keeps its index in the layer list and gets the mask and position embeddings
    of the full forward; it skips the final norm unless `final_norm`, and with `eager_attention` uses plain-PyTorch
    attention (fused kernels have no forward-mode derivative). These are the only edits llmaudit makes to a
    model: the original objects are taken before any change and put back in the `finally`, so that any exception,
    KeyboardInterrupt included, leaves the model as it was."""
    layout = architectures.layout(hf)
    blocks_owner, blocks_name = architectures.locate(hf, layout.blocks)
    norm_owner, norm_name = architectures.locate(hf, layout.final_norm)
    blocks, norm = getattr(blocks_owner, blocks_name), getattr(norm_owner, norm_name)
    attention, skip = hf.config._attn_implementation, _PassThrough()
    try:
        setattr(blocks_owner, blocks_name,
                torch.nn.ModuleList([block if i in kept else skip for i, block in enumerate(blocks)]))
        if not final_norm:
            setattr(norm_owner, norm_name, torch.nn.Identity())
        if eager_attention:
            hf.config._attn_implementation = "eager"
        yield
    finally:
        setattr(blocks_owner, blocks_name, blocks)
        setattr(norm_owner, norm_name, norm)
        if hf.config._attn_implementation != attention:
            hf.config._attn_implementation = attention
