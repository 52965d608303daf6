"""Every shipped params file runs as shipped: it loads, a GPU profile's batches fit one 80 GB card, and its data splits
leave every decision task its cases and every steering vector its validation and causal-check rows."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from conftest import shipped_profiles
from llmaudit.chapters.decision_tasks import TASKS
from llmaudit.chapters.steering_vectors.recipes import RECIPES, validation_size
from llmaudit.config import load_params
from llmaudit.models import memory

GIB = 1 << 30
# The largest model a shipped GPU profile audits: Llama 3.1 8B in bfloat16 (Ministral 8B and Qwen2.5 7B are no larger
# per token: their widths, MLPs and key/value heads are at most these).
LARGEST = memory.Shape(blocks=36, width=4096, mlp=14336, queries=4096, keys=1024, item=2)
WEIGHTS = 8.03e9 * 2
PROFILES = shipped_profiles()
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


def test_the_profiles_are_the_tracked_params_files(tmp_path: Path) -> None:
    """A params file left untracked in params/ is not a shipped profile: the suite neither runs nor fails on it."""
    (tmp_path / "params").mkdir()
    for name in ("shipped", "left-here"):
        (tmp_path / "params" / f"{name}.yaml").write_text(f"name: {name}\n", encoding="utf-8")
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    subprocess.run(["git", "-C", str(tmp_path), "add", "params/shipped.yaml"], check=True)
    assert shipped_profiles(tmp_path) == ["shipped"]
