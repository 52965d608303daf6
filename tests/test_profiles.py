"""Every shipped params file runs as shipped: it loads, a GPU profile's batches fit one 80 GB card, and its data splits
leave every decision task its cases and every steering vector its validation and causal-check rows."""

from __future__ import annotations

import pytest

from llmaudit.chapters.decision_tasks import TASKS
from llmaudit.chapters.steering_vectors.recipes import RECIPES, validation_size
from llmaudit.config import available_models, load_params
from llmaudit.models import memory

GIB = 1 << 30
# The largest model a shipped GPU profile audits: Llama 3.1 8B in bfloat16 (Ministral 8B and Qwen2.5 7B are no larger
# per token: their widths, MLPs and key/value heads are at most these).
LARGEST = memory.Shape(blocks=36, width=4096, mlp=14336, queries=4096, keys=1024, item=2)
WEIGHTS = 8.03e9 * 2
PROFILES = available_models()
GPU_PROFILES = [name for name in PROFILES if load_params(name).model.device == "cuda"]


@pytest.mark.parametrize("name", PROFILES)
def test_profile_loads(name) -> None:
    assert load_params(name).name == name


@pytest.mark.parametrize("name", GPU_PROFILES)
def test_gpu_profile_plans_batches_that_fit_one_80_gb_card(name) -> None:
    """Every pass a GPU profile runs (plain, eleven lambdas stacked, the derivative) holds, at its planned size, less
    than the usable share of what an 80 GB card has beside the weights."""
    params = load_params(name)
    assert params.batch_tokens == memory.AUTO, "a GPU profile plans its batches from the card's memory"
    free = 80 * GIB - WEIGHTS
    for stacked, derivative in ((1, False), (params.tasks.lambda_batch, False), (1, True)):
        tokens = memory.planned_tokens(LARGEST, free, stacked, derivative)
        assert tokens >= 1024, (stacked, derivative, tokens)  # room for whole prompts
        held = tokens * LARGEST.token_bytes(stacked, derivative) + 2 * memory.SCORE_BYTES
        assert held < memory.USABLE * free, (stacked, derivative, tokens)


@pytest.mark.parametrize("name", PROFILES)
def test_profile_data_splits_leave_every_task_and_vector_its_rows(name, mirror) -> None:
    params = load_params(name)
    for recipe in RECIPES.values():  # raises when validation would leave the causal check too few rows
        assert validation_size(recipe, params.steering.val_rows.get(recipe.dataset), params.steering.check_rows,
                               mirror) >= 2
    for task_name, task in TASKS.items():
        if not params.tasks.run(task_name):
            continue
        n = params.tasks.sizes.get(task_name)
        for variant in ("neutral", *task.black_box_variants):
            items = task.items(variant, n, params.seed, mirror)
            assert items and (n is None or len({item.case for item in items}) == n), (task_name, variant)


@pytest.mark.parametrize("name", GPU_PROFILES)
def test_gpu_profile_runs_the_markedness_and_framing_papers_protocols(name) -> None:
    """Paper 004 §3.4: sampled answers (temperature 0.8, 3 tokens, string match, no fallback), the B.2 template, both
    demonstration pools, zero-shot chain-of-thought with 64 tokens of reasoning, the five seeds; paper 001 §4.2: 10
    sampled answers of at most 50 tokens per prompt."""
    markedness, framing = load_params(name).markedness, load_params(name).framing
    assert (markedness.decoding, markedness.temperature, markedness.max_new_tokens) == ("sampled", 0.8, 3)
    assert (markedness.template, markedness.cot, markedness.reasoning_tokens) == ("paper", True, 64)
    assert markedness.pools == ["sst5", "semeval"] and not markedness.fallback
    assert markedness.seeds == [2024, 2025, 2026, 2027, 2028]
    assert (framing.samples, framing.max_new_tokens) == (10, 50)
