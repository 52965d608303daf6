"""Time markedness's sampled runs on the scale test's setup (the tiny stand-in, the 360 'amazon' probes): one
zero-shot, one 9-shot and one chain-of-thought run at the params' token budget, then the 9-shot run again at a budget
of 64 tokens (several batches, as on a GPU where the decoding memory bounds a batch), each with its wall seconds and
ledger (actual and minimum token-blocks); the answers and label probabilities are saved to compare two versions.
Usage: python benchmarks/markedness_runs.py PARAMS.yaml OUT.pt   (LLMAUDIT_DATA: the data mirror)"""

from __future__ import annotations

import sys
import time

import torch

from llmaudit.chapters.markedness.prompts import probe_set
from llmaudit.chapters.markedness.protocol import classify_run, plan
from llmaudit.config import load_params
from llmaudit.data.store import data_dir
from llmaudit.ledger import Ledger
from llmaudit.models import load_model
from llmaudit.models.request import Runtime


def main(params_path: str, out: str) -> None:
    params = load_params(params_path)
    sizes, mirror = params.markedness, data_dir()
    model = load_model(params.name, params.model)
    examples = probe_set("amazon", mirror, sizes.templates.get("amazon"), params.seed, sizes.all_terms)
    runs = plan(sizes, mirror)
    found = {}
    budget = model.runtime.batch_tokens
    for run, tokens in [(runs[0], budget), (runs[2], budget), (runs[-1], budget), (runs[2], 64)]:
        model.runtime = Runtime(batch_tokens=tokens)
        model.ledger = Ledger(model.n_layers)
        start = time.perf_counter()
        frame = classify_run(model, examples, run, sizes)
        seconds = time.perf_counter() - start
        totals = model.ledger.totals()
        name = f"{run.regime} @{tokens}"
        print(f"{name:24s} {seconds:7.1f} s  actual {totals['actual']:10,d}  minimum {totals['minimum']:10,d}  "
              f"ratio {totals['actual'] / totals['minimum']:.3f}", flush=True)
        found[name] = {"answer": list(frame["answer"]), "reasoning": list(frame["reasoning"]),
                       "probs": torch.tensor(frame[[c for c in frame.columns if c.startswith("p_")]].to_numpy()),
                       "seconds": seconds, **totals}
    torch.save(found, out)


if __name__ == "__main__":
    main(*sys.argv[1:3])
