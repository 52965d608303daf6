"""Batches that fit by themselves (models/memory.py): `batch_tokens: auto` plans smaller batches for less free memory,
and an engine that runs out of memory mid-call halves its batches, keeps what it finished and gives the numbers of an
unconstrained run."""

from __future__ import annotations

import warnings

import pytest
import torch

from llmaudit.chapters.steering_vectors import SteeringVector
from llmaudit.errors import AuditError
from llmaudit.models import memory
from llmaudit.models.loading import architectures
from llmaudit.models.passes.prefix import forward_shared_prefix
from llmaudit.models.passes.sweep import split_sweep
from test_prefix import variant_texts

GIB = 1 << 30
LLAMA_8B = memory.Shape(blocks=32, width=4096, mlp=14336, queries=4096, keys=1024, item=2)  # bfloat16


def test_less_free_memory_plans_smaller_batches() -> None:
    plans = [memory.planned_tokens(LLAMA_8B, free * GIB) for free in (4, 16, 64)]
    assert plans[0] < plans[1] < plans[2]
    assert memory.planned_tokens(LLAMA_8B, 16 * GIB, stacked=11) < plans[1] // 10  # eleven lambdas a pass
    assert memory.planned_tokens(LLAMA_8B, GIB // 2) == memory.MIN_TOKENS  # nothing fits: the smallest batch


def small_device(monkeypatch, free: int) -> None:
    """Pretend the device has `free` bytes and plans like a GPU (no CPU cap)."""
    monkeypatch.setattr(memory, "free_bytes", lambda device: free)
    monkeypatch.setattr(memory, "CPU_TOKENS", memory.MAX_TOKENS)


def batch_sizes(model) -> tuple[list[int], torch.utils.hooks.RemovableHandle]:
    """Token positions of each batch the first block runs, recorded as they come."""
    seen: list[int] = []
    hook = architectures.blocks(model.hf)[0].register_forward_pre_hook(
        lambda module, args, kwargs: seen.append(_tokens(args, kwargs)), with_kwargs=True)
    return seen, hook


def _tokens(args, kwargs) -> int:
    h = args[0] if args else kwargs["hidden_states"]
    return h.shape[0] * h.shape[1]


def test_auto_on_a_small_device_runs_smaller_batches_with_the_same_numbers(tiny_model, monkeypatch) -> None:
    texts, labels = variant_texts(tiny_model), tiny_model.single_token_ids(["she", "he", "good"])
    want = forward_shared_prefix(tiny_model.handle, texts, labels, layers=[1], batch_tokens=4096, tree=False)
    per_token = memory.Shape.of(tiny_model.hf).token_bytes()
    small_device(monkeypatch, int((2 * memory.SCORE_BYTES + 40 * per_token) / memory.USABLE))
    assert memory.batch_budget(tiny_model.hf, "cpu", memory.AUTO) == memory.MIN_TOKENS
    seen, hook = batch_sizes(tiny_model)
    try:
        got = forward_shared_prefix(tiny_model.handle, texts, labels, layers=[1], batch_tokens=memory.AUTO, tree=False)
    finally:
        hook.remove()
    assert len(seen) > 1 and max(seen) <= memory.MIN_TOKENS
    torch.testing.assert_close(got.probs, want.probs, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(got.acts, want.acts, atol=1e-6, rtol=1e-5)


def test_backing_off_halves_the_budget_and_reruns_only_unfinished_items() -> None:
    """Items in batches of `budget // 100`; the second batch runs out of memory once: the first batch's items are kept,
    the rest are planned again at half the budget, and every item finishes exactly once."""
    finished: list[list[int]] = []
    failures = [1]

    def plan(left, budget):
        size = budget // 100
        for start in range(0, len(left), size):
            batch = left[start:start + size]
            yield batch, batch

    def run(batch, budget):
        if len(finished) == 1 and failures[0]:
            failures[0] -= 1
            raise torch.OutOfMemoryError("CUDA out of memory (injected)")
        finished.append(batch)

    with pytest.warns(UserWarning, match="out of memory at 400 tokens a batch: going on at 200"):
        memory.backing_off(10, 400, plan, run)
    assert finished == [[0, 1, 2, 3], [4, 5], [6, 7], [8, 9]]


def test_other_errors_are_not_taken_for_memory() -> None:
    def run(batch, budget):
        raise RuntimeError("shape mismatch")

    with pytest.raises(RuntimeError, match="shape mismatch"):
        memory.backing_off(3, 64, lambda left, budget: [(left, left)], run)


def failing_first(model, times: int = 1) -> tuple[list[int], torch.utils.hooks.RemovableHandle]:
    """Make the first block raise the allocator's error on its first `times` batches of more than one row (the shared
    beginning runs alone); returns the rows of the batches it let through, recorded as they come, and the hook."""
    ran: list[int] = []
    left = [times]

    def hook(module, args, kwargs):
        h = args[0] if args else kwargs["hidden_states"]
        if len(h) > 1 and left[0] > 0:
            left[0] -= 1
            raise torch.OutOfMemoryError(f"CUDA out of memory (injected at {h.shape[0] * h.shape[1]} tokens)")
        ran.append(len(h))

    return ran, architectures.blocks(model.hf)[0].register_forward_pre_hook(hook, with_kwargs=True)


def steering(model) -> SteeringVector:
    return SteeringVector("v", "gender", 1, torch.nn.functional.normalize(torch.ones(model.width), dim=0),
                          torch.zeros(model.width), k=2.0)


@pytest.mark.parametrize("engine", ["prefix", "traced", "sweep"])
def test_an_engine_out_of_memory_halves_its_batches_with_the_same_numbers(engine, tiny_model) -> None:
    texts, labels = variant_texts(tiny_model), tiny_model.single_token_ids(["she", "he", "good"])
    lambdas, targets = [-1.0, None, 1.0], [0] * len(texts)

    def call():
        if engine == "prefix":
            out = forward_shared_prefix(tiny_model.handle, texts, labels, layers=[1], batch_tokens=4096)
            return out.probs, out.acts
        if engine == "traced":
            out = tiny_model.forward(texts, labels, layers=[1], batch_tokens=4096, traced=True)
            return out.probs, out.acts
        out = split_sweep(tiny_model.handle, texts, labels, steering(tiny_model), lambdas, targets, batch_tokens=4096,
                          lambda_batch=3)
        return out.probs, out.derivative

    want = call()
    _, hook = failing_first(tiny_model)
    try:
        with pytest.warns(UserWarning, match="out of memory at 4096 tokens a batch: going on at 2048"):
            got = call()
    finally:
        hook.remove()
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-5)


def test_out_of_memory_at_the_smallest_batch_is_one_line(tiny_model) -> None:
    texts, labels = variant_texts(tiny_model), tiny_model.single_token_ids(["she", "he"])
    _, hook = failing_first(tiny_model, times=10**6)
    try:
        with pytest.raises(AuditError, match=r"^out of memory with batch_tokens=512 \(batches halved down to 64"), \
                warnings.catch_warnings():
            warnings.simplefilter("ignore")
            forward_shared_prefix(tiny_model.handle, texts, labels, batch_tokens=512, tree=False)
    finally:
        hook.remove()


def test_a_gpu_s_free_memory_counts_what_the_allocator_holds_unused(monkeypatch) -> None:
    """PyTorch keeps an earlier pass's blocks cached (reserved, not allocated) and hands them out again: counted as
    used, `auto` would plan smaller batches after every call."""
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device: (100 * GIB, 140 * GIB))
    monkeypatch.setattr(torch.cuda, "memory_reserved", lambda device: 30 * GIB)
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda device: 18 * GIB)
    assert memory.free_bytes("cuda") == 112 * GIB


def test_a_remote_model_plans_the_cpu_batch() -> None:
    assert memory.batch_budget(None, "cpu", memory.AUTO) == memory.CPU_TOKENS
    assert memory.batch_budget(None, "cpu", 512) == 512
