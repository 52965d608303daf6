"""The shared-prefix engine against the traced forward on the same inputs, for three kinds of prompt set of the
default model: 9-shot race-template sentences (markedness: one long common beginning), the gender_id vector's
training prompts (steering: six instruction templates, long texts) and the credit task's explicit prompts
(decision tasks: the two gender variants of each case). Each set runs three ways: the traced forward (each prompt
whole), the common beginning only (the engine without token trees), with the prompts after it packed as token
trees, and with token trees under transformers' own SDPA attention (key/value heads repeated per query head, as before
`models.passes.attention`). Prints, for each, seconds, prompt tokens/s and the compute ledger's actual / minimum, checks
that all agree to 1e-4, and the speed ratios measured in this run.
Usage: python benchmarks/prefix.py [N_PROMPTS]   (per set; default 64)"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

import torch

from llmaudit.chapters.decision_tasks import TASKS, answer_ids
from llmaudit.chapters.markedness.metrics import LABELS
from llmaudit.chapters.markedness.prompts import classification_prompt, demonstration_pool, demonstrations, probe_set
from llmaudit.chapters.steering_vectors.extract import tokens_for
from llmaudit.chapters.steering_vectors.recipes import RECIPES, rows
from llmaudit.config import load_params
from llmaudit.data import data_dir
from llmaudit.ledger import Ledger
from llmaudit.models import AuditModel, load_model
from llmaudit.models.passes import attention
from llmaudit.models.passes.batching import ForwardOutput
from llmaudit.models.passes.prefix import forward_shared_prefix


def prompt_sets(model: AuditModel, n: int) -> dict[str, tuple[list[str], list[int]]]:
    """Name -> (chat-formatted prompts, label ids) of the three kinds of prompt set."""
    mirror = data_dir()
    sentences = [e.text for e in probe_set("regard", mirror, None, 0)][:n]
    demos = demonstrations(demonstration_pool("sst5", mirror), seed=2024)
    recipe = RECIPES["gender_id"]
    frame = rows(recipe, "train", n, 0, mirror)
    credit = TASKS["credit"]
    items = credit.items("explicit", n // 2, 0, mirror)
    return {
        "9-shot sentences": ([model.chat(*classification_prompt(text, demos)) for text in sentences],
                             answer_ids(model.tokenizer, LABELS)),
        "template prompts": ([model.chat(i, p) for i, p in zip(frame["instruction"], frame["prefix"])],
                             tokens_for(model, recipe.concept, mirror).ids),
        "case variants": ([model.chat(item.prompt, item.prefix) for item in items],
                          answer_ids(model.tokenizer, credit.answers)),
    }


def with_sdpa(model: AuditModel, run: Callable[[], ForwardOutput]) -> ForwardOutput:
    """`run()` with the model on transformers' own SDPA attention (the key/value heads repeated per query head)."""
    model.hf.set_attn_implementation("sdpa")
    try:
        return run()
    finally:
        model.hf.set_attn_implementation(attention.NAME)


def main(n: int) -> None:
    params = load_params("smollm2-135m-instruct")
    model = load_model(params.name, params.model)
    print(f"torch threads {torch.get_num_threads()}, batch_tokens {params.batch_tokens}")
    engines = {
        "traced forward": lambda texts, labels: model.forward(texts, labels, batch_tokens=params.batch_tokens,
                                                              traced=True),
        "common beginning": lambda texts, labels: forward_shared_prefix(model.handle, texts, labels,
                                                                        batch_tokens=params.batch_tokens, tree=False),
        "token trees": lambda texts, labels: forward_shared_prefix(model.handle, texts, labels,
                                                                   batch_tokens=params.batch_tokens),
        "repeated heads": lambda texts, labels: with_sdpa(model, lambda: forward_shared_prefix(
            model.handle, texts, labels, batch_tokens=params.batch_tokens)),
    }
    for name, (texts, labels) in prompt_sets(model, n).items():
        tokens = sum(len(e) for e in model.encode(texts))
        print(f"\n{name}: {len(texts)} prompts, {tokens} tokens")
        seconds, outputs = {}, {}
        for engine, run in engines.items():
            model.ledger = Ledger(model.n_layers)
            started = time.perf_counter()
            outputs[engine] = run(texts, labels).probs
            seconds[engine] = time.perf_counter() - started
            ledger = model.ledger
            print(f"  {engine:17s} {seconds[engine]:7.1f} s  {tokens / seconds[engine]:7.0f} tokens/s  "
                  f"actual / minimum {ledger.actual / ledger.minimum:5.2f}")
        gap = max((outputs[e] - outputs["traced forward"]).abs().max().item() for e in engines)
        print(f"  token trees vs traced {seconds['traced forward'] / seconds['token trees']:.2f}x, vs common "
              f"beginning {seconds['common beginning'] / seconds['token trees']:.2f}x; grouped attention vs repeated "
              f"heads {seconds['repeated heads'] / seconds['token trees']:.2f}x; max |difference| {gap:.1e}")
        assert gap < 1e-4


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 64)
