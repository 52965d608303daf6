"""Grouped attention (models/passes/attention.py) gives transformers' SDPA numbers on every supported architecture: a
padded batch (SDPA repeats the key/value heads), a continuation of a cached beginning, one decoding step (SDPA packs
the query heads) and an unpadded prompt (the causal kernel without a mask)."""

from __future__ import annotations

import pytest
import torch

from llmaudit.models.passes import attention
from llmaudit.models.passes.batching import pad
from test_sweep_architectures import ARCHITECTURES, PROMPTS, build_model


def _logits(hf: torch.nn.Module, implementation: str, ids: torch.Tensor, mask: torch.Tensor) -> list[torch.Tensor]:
    """Logits of a padded batch, of its last five tokens after a cache of the rest, of one decoding step after the
    whole batch and of the first row unpadded, under `implementation`."""
    hf.set_attn_implementation(implementation)
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    with torch.inference_mode():
        whole = hf(input_ids=ids, attention_mask=mask, position_ids=positions, use_cache=True)
        head = hf(input_ids=ids[:, :-5], attention_mask=mask[:, :-5], position_ids=positions[:, :-5], use_cache=True)
        tail = hf(input_ids=ids[:, -5:], attention_mask=mask, position_ids=positions[:, -5:],
                  past_key_values=head.past_key_values).logits
        step_mask = torch.cat([mask, torch.ones(len(ids), 1, dtype=mask.dtype)], dim=1)
        step = hf(input_ids=ids[:, -1:], attention_mask=step_mask, position_ids=positions[:, -1:] + 1,
                  past_key_values=whole.past_key_values).logits
        alone = hf(input_ids=ids[-1:, mask[-1].bool()]).logits
    return [whole.logits, tail, step, alone]


@pytest.mark.parametrize("model_type", ARCHITECTURES)
def test_grouped_attention_gives_sdpa_numbers(model_type) -> None:
    model = build_model(model_type)
    hf = model.hf
    assert hf.config._attn_implementation == attention.NAME  # every local model runs it
    assert hf.config.num_attention_heads > hf.config.num_key_value_heads  # grouped heads: the case it changes
    ids, mask = pad(model.encode(PROMPTS), model.tokenizer.pad_token_id)
    try:
        reference = _logits(hf, "sdpa", ids, mask)
        grouped = _logits(hf, attention.NAME, ids, mask)
    finally:
        hf.set_attn_implementation(attention.NAME)
    for expected, got in zip(reference, grouped):
        assert torch.allclose(got, expected, atol=1e-5, rtol=0)


def test_a_model_on_another_implementation_keeps_it(tiny_model) -> None:
    hf = tiny_model.hf
    try:
        hf.set_attn_implementation("eager")
        attention.use_grouped(hf)
        assert hf.config._attn_implementation == "eager"
    finally:
        hf.set_attn_implementation(attention.NAME)


def test_masked_attention_in_query_chunks_equals_one_call(monkeypatch) -> None:
    """A score budget too small for one call splits the queries of a tree-masked, grouped call into chunks; the output
    is the single call's, and no call holds more scores than the budget allows."""
    torch.manual_seed(0)
    query, key, value = torch.randn(2, 4, 37, 8), torch.randn(2, 2, 45, 8), torch.randn(2, 2, 45, 8)
    mask = torch.rand(2, 1, 37, 45) > 0.3
    mask[..., 0] = True  # every query attends to something
    whole, _ = attention.grouped_sdpa(torch.nn.Module(), query, key, value, mask)
    seen = []
    sdpa = torch.nn.functional.scaled_dot_product_attention

    def recording(q, k, v, **kwargs):
        seen.append(q.shape[2])
        return sdpa(q, k, v, **kwargs)

    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", recording)
    budget = 4 * 2 * 4 * 45 * 5  # scores of five queries
    monkeypatch.setattr(attention, "SCORE_BYTES", budget)
    chunked, _ = attention.grouped_sdpa(torch.nn.Module(), query, key, value, mask)
    assert seen == [5] * 7 + [2]
    assert torch.allclose(chunked, whole, atol=1e-6, rtol=0)


def test_token_trees_on_flex_attention_equal_the_plain_forward(tiny_model, monkeypatch) -> None:
    """With the fused kernel switched on (FlexAttention's eager reference on a CPU), the packed token-tree forward
    runs every tree-masked block on it and gives the traced forward's numbers; the decoding steps and unmasked calls
    stay on SDPA."""
    from torch.nn.attention.flex_attention import flex_attention

    from llmaudit.models.passes import flex
    from llmaudit.models.passes.prefix import forward_shared_prefix
    from test_prefix import variant_texts

    calls: list[tuple[int, ...]] = []

    def recording(query, key, value, **kwargs):
        calls.append(tuple(query.shape))
        return flex_attention(query, key, value, **kwargs)

    texts, labels = variant_texts(tiny_model), tiny_model.single_token_ids(["she", "he", "good"])
    want = tiny_model.forward(texts, labels, layers=[1, 3], traced=True)
    monkeypatch.setattr(flex, "supported", lambda device: True)
    monkeypatch.setattr(flex, "_kernel", lambda: recording)
    got = forward_shared_prefix(tiny_model.handle, texts, labels, layers=[1, 3])
    assert len(calls) == 2 * tiny_model.n_layers  # the common beginning, then one batch of tree rows, every block
    assert all(shape[2] > 1 for shape in calls) and calls[-1][0] > 1
    torch.testing.assert_close(got.probs, want.probs, atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(got.acts, want.acts, atol=1e-4, rtol=1e-4)


def test_a_block_mask_is_made_once_per_mask_and_keeps_the_mask_s_pattern() -> None:
    """Every block of a pass gets the same mask object: its block mask is made once; the block mask allows exactly
    what the boolean mask allows (FlexAttention with it equals SDPA with the mask)."""
    from torch.nn.attention.flex_attention import flex_attention

    from llmaudit.models.passes import flex

    torch.manual_seed(0)
    query, key, value = torch.randn(2, 4, 37, 8), torch.randn(2, 2, 45, 8), torch.randn(2, 2, 45, 8)
    mask = torch.rand(2, 1, 37, 45) > 0.3
    mask[..., 0] = True
    assert flex.block_mask(mask) is flex.block_mask(mask)
    assert flex.block_mask(mask.clone()) is not flex.block_mask(mask)
    got = flex_attention(query, key, value, block_mask=flex.block_mask(mask), scale=0.3, enable_gqa=True)
    want = torch.nn.functional.scaled_dot_product_attention(query, key, value, attn_mask=mask, scale=0.3,
                                                            enable_gqa=True)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-4)


def test_a_failing_fused_kernel_falls_back_on_chunked_sdpa_once(monkeypatch) -> None:
    """A kernel that fails on this card (a compiler error) warns once, turns itself off and leaves the call to chunked
    SDPA, whose result it returns: an audit never stops on the fast path."""
    from llmaudit.models.passes import attention, flex

    def broken(*args, **kwargs):
        raise RuntimeError("triton: no kernel for this card\nlong trace")

    monkeypatch.setattr(flex, "_failed", "")
    monkeypatch.setattr(flex, "_kernel", lambda: broken)
    monkeypatch.setattr(flex, "supported", lambda device: not flex._failed)
    torch.manual_seed(0)
    query, key, value = torch.randn(1, 4, 6, 8), torch.randn(1, 2, 6, 8), torch.randn(1, 2, 6, 8)
    mask = torch.ones(6, 6, dtype=torch.bool).tril()[None, None]
    with pytest.warns(UserWarning, match="FlexAttention failed .RuntimeError: triton: no kernel for this card.;"):
        got, _ = attention.grouped_sdpa(torch.nn.Module(), query, key, value, mask)
    want = torch.nn.functional.scaled_dot_product_attention(query, key, value, attn_mask=mask, enable_gqa=True)
    torch.testing.assert_close(got, want.transpose(1, 2))
    assert flex._failed.startswith("RuntimeError") and not flex.supported(query.device)
