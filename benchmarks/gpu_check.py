"""Check the audit primitive on a GPU at 8B scale without downloading weights: a Llama-3.1-8B-shaped model
with random bfloat16 weights and a real tokenizer. Prints batched-vs-single agreement, the projection
edit's exactness, and throughput against a plain transformers forward. Usage:
python benchmarks/gpu_check.py TOKENIZER_DIR"""

from __future__ import annotations

import sys
import time

import torch
from nnsight import TransformersModel
from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

from llmaudit.chapters.steering_vectors import SteeringVector
from llmaudit.models import AuditModel


def main(tokenizer_dir: str) -> None:
    torch.manual_seed(0)
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    config = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
        num_attention_heads=32, num_key_value_heads=8, max_position_embeddings=8192, rope_theta=500000.0,
    )
    with torch.device("cuda"):
        hf = LlamaForCausalLM(config).to(torch.bfloat16).eval()
    lm = TransformersModel(hf, task="text-generation", tokenizer=tokenizer)
    model = AuditModel("random-llama-8b", lm, tokenizer, hf=hf, device="cuda")
    words = "the applicant asked for a loan to buy a car and has paid back every earlier credit on time".split()
    texts = [model.chat(" ".join(words[: 4 + (i * 7) % len(words)] * (1 + i % 9)), "Answer:") for i in range(64)]
    labels = model.single_token_ids(["good", "bad", "yes", "no"])
    tokens = sum(len(tokenizer.encode(t, add_special_tokens=False)) for t in texts)

    batched = model.forward(texts[:16], labels, layers=[8, 16], batch_tokens=4096)
    single = [model.forward([t], labels, layers=[8, 16]) for t in texts[:16]]
    dp = max((s.probs[0] - batched.probs[i]).abs().max().item() for i, s in enumerate(single))
    da = max(((s.acts[0] - batched.acts[i]).norm() / s.acts[0].norm()).item() for i, s in enumerate(single))
    print(f"batched vs single (bf16): max |dp| {dp:.2e}, max relative |d act| {da:.2e}")

    direction = torch.nn.functional.normalize(torch.randn(4096), dim=0)
    vector = SteeringVector("random", "gender", 16, direction, batched.acts[:, 1].mean(0), k=3.0)
    steered = model.forward(texts[:16], labels, layers=[16], intervention=vector.intervention(0.7))
    coordinate = vector.project(steered.acts[:, 0].float())
    print(f"projection edit: (h' - mu0).v = {coordinate.mean():.3f} +- {coordinate.std():.3f} (target {0.7 * 3.0})")

    def timed(fn) -> float:
        fn()
        torch.cuda.synchronize()
        start = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        return time.perf_counter() - start

    def plain() -> None:
        batch = tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False).to("cuda")
        with torch.inference_mode():
            hf(**batch).logits.float().softmax(-1)

    t_plain = timed(plain)
    t_prim = timed(lambda: model.forward(texts, labels, batch_tokens=16384))
    t_acts = timed(lambda: model.forward(texts, labels, layers=range(32), batch_tokens=16384))
    print(f"{len(texts)} prompts, {tokens} tokens on {torch.cuda.get_device_name()}")
    print(f"plain forward, all logits   {tokens / t_plain:8.0f} tokens/s")
    print(f"audit primitive, labels     {tokens / t_prim:8.0f} tokens/s ({t_plain / t_prim:.2f}x)")
    print(f"  + 32 blocks' activations  {tokens / t_acts:8.0f} tokens/s ({t_plain / t_acts:.2f}x)")
    lambdas = [round(-1 + 0.2 * i, 1) for i in range(11)]
    t_loop = timed(lambda: [model.forward(texts, labels, intervention=vector.intervention(lam), batch_tokens=16384)
                            for lam in lambdas])
    for lambda_batch in (1, 11):
        t_sweep = timed(lambda: steered(model, texts=texts, labels=labels, vector=vector, lambdas=lambdas,
                                        batch_tokens=16384, lambda_batch=lambda_batch).probs)
        print(f"sweep of {len(lambdas)} lambdas, {lambda_batch:2d} per pass: {t_sweep:.2f} s vs traced loop "
              f"{t_loop:.2f} s ({t_loop / t_sweep:.2f}x)")
    engine = steered(model, texts=texts[:16], labels=labels, vector=vector, lambdas=lambdas).probs
    loop = torch.stack([model.forward(texts[:16], labels, intervention=vector.intervention(lam)).probs
                        for lam in lambdas])
    print(f"sweep vs traced loop (bf16): max |dp| {(engine - loop).abs().max():.2e}")
    targets = [0] * 16
    exact = steered(model, texts=texts[:16], labels=labels, targets=targets, vector=vector, lambdas=()).derivative
    eps = 0.05
    ends = steered(model, texts=texts[:16], labels=labels, vector=vector, lambdas=[-eps, eps]).probs
    metric = ends[..., 0] / ends.sum(-1)
    finite = (metric[1] - metric[0]) / (2 * eps)
    print(f"exact derivative vs finite difference (bf16, eps {eps}): max |diff| {(exact - finite).abs().max():.2e}, "
          f"max |exact| {exact.abs().max():.2e}")
    print(f"peak GPU memory {torch.cuda.max_memory_allocated() / 2**30:.1f} GiB")


if __name__ == "__main__":
    main(sys.argv[1])
