"""Every shipped params file runs as shipped: it loads, a GPU profile's batches fit one 80 GB card, and its data splits
leave every decision task its cases and every steering vector its validation and causal-check rows."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import torch

from conftest import shipped_profiles
from llmaudit.chapters.decision_tasks import TASKS
from llmaudit.chapters.steering_vectors.recipes import RECIPES, validation_size
from llmaudit.config import load_params
from llmaudit.models import memory
from llmaudit.models.loading.load import DTYPES

GIB = 1 << 30
# Each GPU profile's model as a config-only stand-in (its transformers config class with the published config.json's
# sizes, built on the meta device: no weights, no download), from which its shape and weight bytes are read.
LLAMA3_8B: dict[str, Any] = dict(model_type="llama", num_hidden_layers=32, hidden_size=4096, intermediate_size=14336,
                                 num_attention_heads=32, num_key_value_heads=8, vocab_size=128256)
QWEN25_7B: dict[str, Any] = dict(model_type="qwen2", num_hidden_layers=28, hidden_size=3584, intermediate_size=18944,
                                 num_attention_heads=28, num_key_value_heads=4, vocab_size=152064)
CONFIGS: dict[str, dict[str, Any]] = {
    # the finance and medicine models are Llama 3 8B continued on domain text, the base models tuned into the
    # instruct ones: the same shapes
    "llama-3.1-8b-instruct": LLAMA3_8B, "finance-llama3-8b": LLAMA3_8B, "medicine-llama3-8b": LLAMA3_8B,
    "llama-3.1-8b": LLAMA3_8B, "qwen2.5-7b-instruct": QWEN25_7B, "qwen2.5-7b": QWEN25_7B,
    "ministral-8b-instruct": dict(model_type="mistral", num_hidden_layers=36, hidden_size=4096, intermediate_size=12288,
                                  num_attention_heads=32, num_key_value_heads=8, head_dim=128, vocab_size=131072),
    "saul-7b-instruct": dict(model_type="mistral", num_hidden_layers=32, hidden_size=4096, intermediate_size=14336,
                             num_attention_heads=32, num_key_value_heads=8, vocab_size=32000),
    "qwen3-8b": dict(model_type="qwen3", num_hidden_layers=36, hidden_size=4096, intermediate_size=12288,
                     num_attention_heads=32, num_key_value_heads=8, head_dim=128, vocab_size=151936),
    "gemma-2-9b-it": dict(model_type="gemma2", num_hidden_layers=42, hidden_size=3584, intermediate_size=14336,
                          num_attention_heads=16, num_key_value_heads=8, head_dim=256, vocab_size=256000),
    "phi-4-mini-instruct": dict(model_type="phi3", num_hidden_layers=32, hidden_size=3072, intermediate_size=8192,
                                num_attention_heads=24, num_key_value_heads=8, vocab_size=200064,
                                tie_word_embeddings=True, partial_rotary_factor=0.75),
    "olmo-2-7b-instruct": dict(model_type="olmo2", num_hidden_layers=32, hidden_size=4096, intermediate_size=11008,
                               num_attention_heads=32, num_key_value_heads=32, vocab_size=100352),
    "smollm2-135m-instruct-full": dict(model_type="llama", num_hidden_layers=30, hidden_size=576,
                                       intermediate_size=1536, num_attention_heads=9, num_key_value_heads=3,
                                       vocab_size=49152, tie_word_embeddings=True),
}
PROFILES = shipped_profiles()
GPU_PROFILES = [name for name in PROFILES if load_params(name).model.device == "cuda"]


def standin(name: str) -> tuple[memory.Shape, int]:
    """The shape and weight bytes of a GPU profile's model, in the profile's dtype, from its config-only stand-in."""
    from transformers import AutoConfig, AutoModelForCausalLM

    sizes = dict(CONFIGS[name])
    config = AutoConfig.for_model(sizes.pop("model_type"), **sizes)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config, dtype=DTYPES[load_params(name).model.dtype])
    return memory.Shape.of(model), sum(p.numel() * p.element_size() for p in model.parameters())


@pytest.mark.parametrize("name", PROFILES)
def test_profile_loads(name) -> None:
    assert load_params(name).name == name


@pytest.mark.parametrize("name", GPU_PROFILES)
def test_gpu_profile_plans_batches_that_fit_one_80_gb_card(name) -> None:
    """Every pass a GPU profile runs (plain, eleven lambdas stacked, the derivative) holds, at its planned size, less
    than the usable share of what an 80 GB card has beside the weights."""
    params = load_params(name)
    assert params.batch_tokens == memory.AUTO, "a GPU profile plans its batches from the card's memory"
    assert name in CONFIGS, f"give {name}'s model a config-only stand-in in CONFIGS"
    shape, weights = standin(name)
    free = 80 * GIB - weights
    for stacked, derivative in ((1, False), (params.tasks.lambda_batch, False), (1, True)):
        tokens = memory.planned_tokens(shape, free, stacked, derivative)
        assert tokens >= 1024, (stacked, derivative, tokens)  # room for whole prompts
        held = tokens * shape.token_bytes(stacked, derivative) + 2 * memory.SCORE_BYTES
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


@pytest.mark.parametrize("name", GPU_PROFILES)
def test_gpu_profile_runs_the_markedness_and_framing_papers_protocols(name) -> None:
    """Paper 004 §3.4: plain text, sampled answers (temperature 0.8 with the pipeline's top-k and top-p, 3 tokens,
    string match, a random label for an unparsable answer), the B.2 template, both demonstration pools, zero-shot
    chain-of-thought with 64 tokens of reasoning, the five seeds; paper 001 §4.1-4.2: the plain form, the release's
    decoding, 10 sampled answers of at most 50 tokens per prompt."""
    markedness, framing = load_params(name).markedness, load_params(name).framing
    assert (markedness.decoding, markedness.temperature, markedness.max_new_tokens) == ("sampled", 0.8, 3)
    assert (markedness.template, markedness.cot, markedness.reasoning_tokens) == ("paper", True, 64)
    assert markedness.pools == ["sst5", "semeval"] and markedness.unparsable == "random_label"
    assert (markedness.form, markedness.sampler) == ("plain", "pipeline")
    assert markedness.seeds == [2024, 2025, 2026, 2027, 2028]
    assert (framing.samples, framing.max_new_tokens, framing.form, framing.decoding) == (10, 50, "plain", "release")


@pytest.mark.parametrize("name", GPU_PROFILES)
def test_gpu_profile_runs_the_similarity_and_markedness_papers_sizes(name) -> None:
    """Paper 003: all of BBQ and of StereoSet's intrasentence items, CKA at every block (on a seeded share of the
    questions: every block's states of all of BBQ would not fit in memory); paper 004: all 11 group terms."""
    similarity = load_params(name).similarity
    assert (similarity.per_cell, similarity.stereoset, similarity.depths) == (None, None, None)
    assert similarity.represented() is not None and similarity.represented() >= 10
    assert load_params(name).markedness.all_terms


BASE_OF = {"llama-3.1-8b-instruct": "llama-3.1-8b", "qwen2.5-7b-instruct": "qwen2.5-7b"}


@pytest.mark.parametrize(("tuned", "base"), BASE_OF.items())
def test_instruct_profiles_compare_with_their_base_model_read_without_a_chat_template(tuned, base) -> None:
    """Paper 003's base-to-tuned UNK flip, bias-score change and CKA: the instruct profile names its shipped base
    profile, which reads plain text on the same questions and depths and is audited first (no steered copies of its
    own). Paper 004 prompts base models: the base profile runs markedness, after the steering chapter (its race
    vector)."""
    tuned_params, base_params = load_params(tuned), load_params(base)
    assert tuned_params.similarity.compare_with == [base] and base in PROFILES
    assert tuned_params.model.chat_template and not base_params.model.chat_template
    assert base_params.model.hf == tuned_params.model.hf.removesuffix("-Instruct")
    same = ("per_cell", "stereoset", "depths", "cka_per_cell")
    assert [getattr(base_params.similarity, k) for k in same] == [getattr(tuned_params.similarity, k) for k in same]
    assert base_params.chapters == ["steering_vectors", "similarity", "markedness"]
    assert base_params.similarity.lambdas == []


@pytest.mark.parametrize("name", PROFILES)
def test_every_compared_model_is_a_shipped_profile(name) -> None:
    assert set(load_params(name).similarity.compare_with) <= set(PROFILES)
