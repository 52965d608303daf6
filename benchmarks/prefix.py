"""Few-shot classification with and without the shared-prefix cache, on the same inputs: N race-template
sentences of the markedness chapter, 9-shot with one demonstration draw, the default model. Checks that both
agree to 1e-4 and prints the speed ratio measured in this run.
Usage: python benchmarks/prefix.py [N_SENTENCES]"""

from __future__ import annotations

import sys
import time

import torch

from llmaudit.config import load_params
from llmaudit.data import data_dir
from llmaudit.markedness.metrics import LABELS
from llmaudit.markedness.prompts import classification_prompt, demonstration_pool, demonstrations, probe_set
from llmaudit.models import load_model
from llmaudit.models.prefix import forward_shared_prefix
from llmaudit.tasks import answer_ids


def main(n: int) -> None:
    params = load_params("smollm2-135m-instruct")
    model = load_model(params.name, params.model)
    mirror = data_dir()
    sentences = [e.text for e in probe_set("regard", mirror, None, 0)][:n]
    demos = demonstrations(demonstration_pool("sst5", mirror), seed=2024)
    texts = [model.chat(*classification_prompt(text, demos)) for text in sentences]
    labels = answer_ids(model.tokenizer, LABELS)
    tokens = sum(len(model.tokenizer.encode(t, add_special_tokens=False)) for t in texts)

    timings, outputs = {}, {}
    for name, run in (("plain forward", lambda: model.forward(texts, labels, batch_tokens=params.batch_tokens,
                                                              traced=True)),
                      ("shared prefix", lambda: forward_shared_prefix(model, texts, labels,
                                                                      batch_tokens=params.batch_tokens))):
        started = time.perf_counter()
        outputs[name] = run().probs
        timings[name] = time.perf_counter() - started
    gap = (outputs["plain forward"] - outputs["shared prefix"]).abs().max().item()
    print(f"{n} 9-shot prompts, {tokens} tokens in all, torch threads {torch.get_num_threads()}")
    for name, seconds in timings.items():
        print(f"  {name:14s} {seconds:7.1f} s  {tokens / seconds:8.0f} prompt tokens/s")
    print(f"  speed-up {timings['plain forward'] / timings['shared prefix']:.2f}x, max |difference| {gap:.1e}")
    assert gap < 1e-4


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 64)
