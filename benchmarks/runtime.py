"""Runtime figures of the default model on this machine: load time (first conversion of the packaged GGUF and
cached reload), forward throughput of the audit primitive against a plain transformers forward on the same
prompts, and peak memory. Ratios are measured in this one run. Usage: python benchmarks/runtime.py"""

from __future__ import annotations

import os
import resource
import tempfile
import time

import torch

from llmaudit.config import load_params
from llmaudit.models import load_model

PROMPT = (
    "A loan applicant is {age} years old, has been employed for {years} years as a {job}, rents a flat, "
    "has a checking balance below 200 DM, asks for {amount} DM over {months} months to buy a {purpose}, "
    "and has paid back all earlier credits on time. Savings: less than 100 DM. Other debtors: none. "
) * 3 + "Is this applicant a good or a bad credit risk? Answer with one word."


def timed(fn, repeat: int = 3) -> float:
    """Best wall time of `repeat` calls (after one warm-up call)."""
    fn()
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    torch.manual_seed(0)
    params = load_params("smollm2-135m-instruct")
    with tempfile.TemporaryDirectory() as cache:
        os.environ["LLMAUDIT_CACHE"] = cache
        start = time.perf_counter()
        load_model(params.name, params.model)
        cold = time.perf_counter() - start
        start = time.perf_counter()
        model = load_model(params.name, params.model)
        warm = time.perf_counter() - start

    jobs = ["nurse", "mechanic", "teacher", "clerk", "farmer", "pilot", "chef", "lawyer"]
    texts = [
        model.chat(PROMPT.format(age=25 + i, years=i + 1, job=job, amount=1000 * (i + 1), months=12 + i, purpose="car"),
                   "Answer:")
        for i, job in enumerate(jobs)
    ]
    encoded = [model.tokenizer.encode(t, add_special_tokens=False) for t in texts]
    tokens = sum(len(e) for e in encoded)
    labels = model.single_token_ids(["good", "bad"])
    hf = model.hf

    def plain() -> None:
        """What a straightforward caller does: one padded batch, logits at every position."""
        batch = model.tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False)
        with torch.inference_mode():
            hf(**batch).logits.softmax(-1)

    primitive = timed(lambda: model.forward(texts, labels, batch_tokens=4096))
    with_acts = timed(lambda: model.forward(texts, labels, layers=range(model.n_layers), batch_tokens=4096))
    baseline = timed(plain)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    print(f"model                        {params.name} ({model.n_layers} blocks, width {model.width}, float32)")
    print(f"load, first (GGUF convert)   {cold:6.1f} s")
    print(f"load, cached safetensors     {warm:6.1f} s   ({cold / warm:.1f}x faster)")
    print(f"batch                        {len(texts)} prompts, {tokens} tokens, threads {torch.get_num_threads()}")
    print(f"plain transformers forward   {tokens / baseline:6.0f} tokens/s (all-position logits)")
    print(f"audit primitive, labels      {tokens / primitive:6.0f} tokens/s "
          f"({baseline / primitive:.2f}x the plain forward)")
    print(f"  + all blocks' activations  {tokens / with_acts:6.0f} tokens/s ({baseline / with_acts:.2f}x)")
    print(f"peak resident memory         {peak:6.0f} MiB")


if __name__ == "__main__":
    main()
