"""Decoder blocks return a tensor in transformers 5 and a tuple in earlier releases; read and write the
hidden state through these two functions so that no caller silently takes `output[0]` (batch row 0)."""

from __future__ import annotations

from typing import Any

import torch


def hidden(output: Any) -> torch.Tensor:
    """The residual-stream tensor (batch, tokens, width) of a block's output."""
    return output[0] if isinstance(output, tuple) else output


def with_hidden(output: Any, value: torch.Tensor) -> Any:
    """The block output with its residual stream replaced by `value`, in the block's own output type."""
    return (value, *output[1:]) if isinstance(output, tuple) else value
