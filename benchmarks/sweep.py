"""The steering sweep: the engine against a reference loop with the seed code's structure, on the same inputs
(64 credit profiles, 11 lambdas, the default model). Checks that both agree to 1e-4 and prints the speed ratio
measured in this run, and the engine's achieved FLOP/s against a dense float32 matmul on this machine.
Usage: python benchmarks/sweep.py [N_PROFILES]"""

from __future__ import annotations

import sys
import time

import torch

from llmaudit.chapters.decision_tasks import answer_ids
from llmaudit.chapters.decision_tasks.credit import CREDIT
from llmaudit.chapters.steering_vectors import SteeringVector
from llmaudit.config import REPO, load_params
from llmaudit.ledger import Ledger
from llmaudit.models import load_model
from llmaudit.models.ask import ask
from llmaudit.models.passes.layers import hidden, with_hidden
from llmaudit.models.request import Edit, Request, Runtime

LAMBDAS = [round(-1 + 0.2 * i, 1) for i in range(11)]


def reference_loop(model, texts, labels, vector, batch_size: int = 8) -> torch.Tensor:
    """Lambda outermost, every block and the full-vocabulary logits at every position for every coefficient."""
    hf, block = model.hf, model.hf.model.layers[vector.layer]
    out = []
    for lam in LAMBDAS:
        edit = vector.intervention(lam)
        handle = block.register_forward_hook(
            lambda module, args, output, edit=edit: with_hidden(output, edit(hidden(output))))
        rows = []
        try:
            for start in range(0, len(texts), batch_size):
                batch = model.tokenizer(texts[start : start + batch_size], return_tensors="pt", padding=True,
                                        add_special_tokens=False)
                positions = (batch.attention_mask.cumsum(-1) - 1).clamp(min=0)
                with torch.inference_mode():
                    logits = hf(**batch, position_ids=positions).logits
                rows.append(torch.softmax(logits[:, -1].float(), -1)[:, labels])
        finally:
            handle.remove()
        out.append(torch.cat(rows))
    return torch.stack(out)


def flops(model, lengths: list[int], layer: int, n_lambdas: int) -> float:
    """Multiply-adds x 2 of the engine's work: blocks below the layer once, above it per lambda, one unembedding."""
    cfg = model.hf.config
    d, f, heads, kv = cfg.hidden_size, cfg.intermediate_size, cfg.num_attention_heads, cfg.num_key_value_heads
    head = d // heads
    per_token = 2 * (d * d * 2 + 2 * d * kv * head + 3 * d * f)  # q,o + k,v projections + gated MLP
    attention = sum(2 * t * (t + 1) * d for t in lengths)  # causal scores and weighted sum: 2 x t(t+1)/2 x d MACs
    block = per_token * sum(lengths) + attention
    lower, upper = layer + 1, cfg.num_hidden_layers - layer - 1
    return block * (lower + upper * n_lambdas) + 2 * d * cfg.vocab_size * len(lengths) * n_lambdas


def matmul_gflops(m: int = 2048, k: int = 576, n: int = 1536) -> float:
    """Dense float32 matmul throughput of block-sized shapes on this machine."""
    a, b = torch.randn(m, k), torch.randn(k, n)
    a @ b
    start = time.perf_counter()
    for _ in range(20):
        a @ b
    return 20 * 2 * m * k * n / (time.perf_counter() - start) / 1e9


def main(n: int = 64) -> None:
    torch.manual_seed(0)
    params = load_params("smollm2-135m-instruct")
    model = load_model(params.name, params.model)
    items = CREDIT.items("neutral", n, seed=0)
    texts = [model.chat(item.prompt, item.prefix) for item in items]
    labels = answer_ids(model.tokenizer, CREDIT.answers)
    lengths = [len(model.tokenizer.encode(t, add_special_tokens=False)) for t in texts]
    saved = REPO / "reports" / params.name / "vectors" / "gender_lang.safetensors"
    if saved.exists():
        vector = SteeringVector.load(saved)
    else:  # a random direction at the block the default audit chose for gender
        direction = torch.nn.functional.normalize(torch.randn(model.width), dim=0)
        vector = SteeringVector("random", "gender", 25, direction, torch.zeros(model.width), k=100.0)
    layer = vector.layer

    start = time.perf_counter()
    reference = reference_loop(model, texts, labels, vector)
    t_ref = time.perf_counter() - start
    timings, ledgers = {}, {}
    for lambda_batch in (1, 4, 11):
        model.ledger = Ledger(model.n_layers)
        start = time.perf_counter()
        model.runtime = Runtime(batch_tokens=4096, lambda_batch=lambda_batch)
        engine = ask(model, Request(texts=texts, labels=labels, edit=Edit(vector=vector, lambdas=LAMBDAS))).probs
        timings[lambda_batch] = time.perf_counter() - start
        ledgers[lambda_batch] = model.ledger
        gap = (engine - reference).abs().max().item()
        assert gap < 1e-4, f"engine and reference disagree by {gap:.2e}"
    best = min(timings, key=timings.get)
    work = flops(model, lengths, layer, len(LAMBDAS))
    print(f"{n} credit profiles ({sum(lengths)} tokens), {len(LAMBDAS)} lambdas, steering block {layer}, "
          f"{torch.get_num_threads()} threads")
    print(f"reference loop (seed structure)   {t_ref:7.1f} s")
    for lambda_batch, seconds in timings.items():
        print(f"engine, {lambda_batch:2d} lambdas per pass       {seconds:7.1f} s   {t_ref / seconds:5.2f}x faster")
    print(f"max |engine - reference|          {gap:.1e}")
    ran = ledgers[best]
    print(f"engine ran {ran.actual:,} token-blocks, {ran.actual / ran.minimum:.2f}x the minimum (the prompts' shared "
          f"beginning runs once; the reference loop runs {sum(lengths) * model.n_layers * len(LAMBDAS):,})")
    print(f"engine: {work / timings[best] / 1e9:5.1f} GFLOP/s of the unshared sweep's work; dense float32 matmul "
          f"{matmul_gflops():5.1f} GFLOP/s")


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:]))
