"""Grouped-query attention with the key/value heads as they are. transformers' SDPA path copies every key/value head
once per query head it serves whenever an attention mask is given, which is always in a padded batch; for prompts
that continue a long cached beginning (few-shot demonstrations) that copy costs more than the attention itself.
PyTorch's scaled-dot-product attention takes grouped heads directly (`enable_gqa`) and gives the same numbers
(tests/test_attention.py), so every local model runs this instead of "sdpa", as a registered attention
implementation with SDPA's masks.

A given mask (a padded batch, a token tree) keeps PyTorch from its fused kernels for grouped heads, and the math
kernel it falls back on holds every score, batch x heads x queries x keys: quadratic in a packed row's length (an
8B model's tree rows of 4,000 tokens need 2 GiB a row). So on a GPU a boolean mask over several queries (a token tree,
a padded prefill) runs on a fused kernel instead (`models.passes.flex`: FlexAttention with a block mask), and elsewhere
queries run in chunks whose scores fit `SCORE_BYTES`: each query's softmax is over its own row of scores, so a chunk
computes exactly what the whole would."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from llmaudit.models.passes import flex

if TYPE_CHECKING:
    from transformers import PreTrainedModel

NAME = "sdpa_grouped"
SCORE_BYTES = 1 << 28  # the most attention scores (float32) one masked call materialises at once: 256 MiB


def grouped_sdpa(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    is_causal: bool | None = None,
    **kwargs: object,
) -> tuple[torch.Tensor, None]:
    """transformers' `sdpa_attention_forward` for (batch, heads, tokens, head_dim) inputs, without repeating the
    key/value heads; returns (batch, tokens, heads, head_dim) as it does. Without a mask, several query tokens
    attend causally to as many keys (a dynamic cache's masks are given whenever a cache precedes them)."""
    if kwargs.get("softcap") is not None:
        raise ValueError("attention logit soft-capping needs the eager attention implementation")
    q_length = query.shape[2]
    causal = is_causal if is_causal is not None else getattr(module, "is_causal", True)
    causal = q_length > 1 and attention_mask is None and causal
    grouped = query.shape[1] != key.shape[1]
    if attention_mask is not None and attention_mask.dtype == torch.bool and q_length > 1 and dropout == 0.0 \
            and flex.supported(query.device):
        try:
            return flex.attend(query, key, value, attention_mask, scaling).transpose(1, 2).contiguous(), None
        except Exception as error:  # not yet run on every card and compiler: the exact fallback below stays
            flex.give_up(error)
    chunk = query_chunk(query.shape[0] * query.shape[1], q_length, key.shape[2]) if attention_mask is not None \
        else q_length
    parts = [
        torch.nn.functional.scaled_dot_product_attention(
            query[:, :, start : start + chunk], key, value,
            attn_mask=None if attention_mask is None else attention_mask[..., start : start + chunk, :],
            dropout_p=dropout, scale=scaling, is_causal=causal, enable_gqa=grouped,
        )
        for start in range(0, q_length, chunk)
    ]
    out = parts[0] if len(parts) == 1 else torch.cat(parts, dim=2)
    return out.transpose(1, 2).contiguous(), None


def query_chunk(rows: int, queries: int, keys: int) -> int:
    """How many queries of a masked call to run at once: all when `rows` (batch x heads) x queries x keys float32
    scores fit `SCORE_BYTES`, else as many as fit (at least one)."""
    return max(1, min(queries, SCORE_BYTES // (4 * rows * keys)))


def use_grouped(hf: PreTrainedModel) -> None:
    """Run a local model's SDPA attention as `grouped_sdpa` (a model on another implementation keeps it). The
    implementation is registered here, not on import, which would load transformers' model code with llmaudit."""
    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, AttentionMaskInterface

    AttentionInterface.register(NAME, grouped_sdpa)
    AttentionMaskInterface.register(NAME, ALL_MASK_ATTENTION_FUNCTIONS["sdpa"])
    if hf.config._attn_implementation == "sdpa":
        hf.set_attn_implementation(NAME)
