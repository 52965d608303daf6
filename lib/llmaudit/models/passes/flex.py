"""Masked attention on a fused kernel: PyTorch's FlexAttention (`torch.nn.attention.flex_attention`, compiled to one
Triton kernel on a GPU) with a block mask made from the given boolean mask. A token tree's mask
(`models.passes.packing`) is mostly empty blocks, which the kernel skips, and no score is ever held in memory, where
SDPA falls back on its math kernel for an arbitrary mask with grouped heads. Each query's softmax runs over the keys its
mask allows, as SDPA's, so the outputs agree to float rounding (tests/test_attention.py). Used where the device is a
GPU; `models.passes.attention` keeps chunked SDPA as the fallback (a CPU, or a PyTorch without FlexAttention)."""

from __future__ import annotations

import warnings
import weakref
from collections.abc import Callable
from typing import Any

import torch


class _State:
    """What this module keeps in a process: the compiled kernel (None until first asked for, and where this PyTorch
    lacks FlexAttention) and the block mask of the last mask seen (every block of one forward pass gets the same mask
    object), held by a weak reference to the mask. Never pickled with the module: a remote trace ships this module's
    code, not its state (neither a compiled kernel nor a weak reference can be pickled, and a `functools.cache`
    wrapper would be pickled by name, which a server without llmaudit cannot import)."""

    def __init__(self) -> None:
        self.looked = False  # whether the kernel was asked for: it is compiled once per process
        self.kernel: Callable[..., torch.Tensor] | None = None
        self.seen: tuple[weakref.ref[torch.Tensor], Any] | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {"looked": False, "kernel": None, "seen": None}


_state = _State()
# Why the kernel failed in this process (it then stays off: chunked SDPA computes the same attention), '' while not.
_failed = ""


def supported(device: torch.device) -> bool:
    """Whether masked attention on `device` runs on the fused kernel: a CUDA device with FlexAttention that has not
    failed in this process."""
    return device.type == "cuda" and not _failed and _kernel() is not None


def kernel_in_use(device: torch.device) -> str:
    """Which kernel masked attention runs on for `device`, and why the fused one does not where it does not."""
    if supported(device):
        return "flex_attention"
    return f"chunked SDPA ({_failed or 'no CUDA device or no FlexAttention'})"


def give_up(error: Exception) -> None:
    """Turn the kernel off for this process after `error` (a compiler or kernel failure on this card), with one
    warning: the caller falls back on chunked SDPA, which computes the same attention."""
    global _failed
    _failed = f"{type(error).__name__}: {error}".splitlines()[0]
    warnings.warn(f"FlexAttention failed ({_failed}); masked attention runs on chunked SDPA instead", stacklevel=2)


def _kernel() -> Callable[..., torch.Tensor] | None:
    """FlexAttention, compiled (once per process; dynamic shapes, as every batch is as wide as its longest row), or
    None where this PyTorch lacks it."""
    if not _state.looked:
        _state.looked = True
        try:
            from torch.nn.attention.flex_attention import flex_attention
        except ImportError:
            return None
        _state.kernel = torch.compile(flex_attention, dynamic=True)
    return _state.kernel


def block_mask(mask: torch.Tensor) -> Any:
    """The FlexAttention block mask of a (batch, 1, queries, keys) boolean mask (True where a query attends), made once
    per mask object."""
    from torch.nn.attention.flex_attention import create_block_mask

    if _state.seen is not None and _state.seen[0]() is mask:
        return _state.seen[1]
    dense = mask[:, 0]

    def allowed(b: torch.Tensor, h: torch.Tensor, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        return dense[b, q, k]

    made = create_block_mask(allowed, mask.shape[0], None, mask.shape[2], mask.shape[3], device=mask.device)
    _state.seen = (weakref.ref(mask), made)
    return made


def attend(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, mask: torch.Tensor,
           scaling: float | None) -> torch.Tensor:
    """(batch, heads, queries, head_dim) attention outputs of grouped heads under a boolean `mask`, on the compiled
    kernel."""
    run = _kernel()
    if run is None:
        raise RuntimeError("FlexAttention is not available in this PyTorch")
    return run(query, key, value, block_mask=block_mask(mask), scale=scaling,
               enable_gqa=query.shape[1] != key.shape[1])
