"""Where the batched sampler's tokens differ from `generate`'s on a device, is it the draw or rounding? Two checks:
the draw (`race.draw_one`, the device's own generator) against `torch.multinomial` on the same probabilities and
stream; and the sampler against one `generate` call per prompt on the first two framing calls of the paper-size
profile, per stand-in shape and dtype, with the step at which each answer first differs (50: never).
Run on a GPU as benchmarks/gpu_check.py is (its header says what to carry); measured runs are under
benchmarks/results/. Usage: python benchmarks/sampler_agreement.py OUT.json [--device cuda] [--tokenizer DIR]
[--runs tiny:float32 llama-3.1-8b:float32 llama-3.1-8b:bfloat16]"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gpu_check  # noqa: E402 - the check's stand-in and workloads

from llmaudit.config import load_params  # noqa: E402
from llmaudit.models.memory import AUTO  # noqa: E402
from llmaudit.models.request import SampleRequest  # noqa: E402
from llmaudit.models.sampling.batched import sample_calls  # noqa: E402
from llmaudit.models.sampling.plain_sampling import generated  # noqa: E402
from llmaudit.models.sampling.race import draw_one  # noqa: E402


def draw_agreement(device: str, vocab: int = 49152) -> float:
    """Share of 60 draws (20 seeds, 3 steps of one stream, 7 rows) where `draw_one` gives multinomial's tokens."""
    equal = []
    for seed in range(20):
        noise = torch.Generator(device).manual_seed(seed + 100)
        probs = torch.softmax(3 * torch.randn(7, vocab, device=device, generator=noise), -1)
        ours, theirs = torch.Generator(device).manual_seed(seed), torch.Generator(device).manual_seed(seed)
        for _ in range(3):
            equal.append(torch.equal(draw_one(probs, ours), torch.multinomial(probs, 1, generator=theirs).squeeze(1)))
    return sum(equal) / len(equal)


def sampler_against_generate(shape: str, dtype: torch.dtype, device: str, tokenizer: Path | None) -> dict:
    """The stand-in of `shape` in `dtype`: the share of equal tokens and each answer's first differing step."""
    model = gpu_check.build(shape, device, tokenizer)
    model.hf.to(dtype)
    new = load_params(gpu_check.PROFILE).framing.max_new_tokens
    _, _, framing = gpu_check.workloads(model, 4)
    chosen = framing[:2]
    request = SampleRequest(calls=chosen, max_new_tokens=new)
    ours = sample_calls(model.handle, request, batch_tokens=AUTO).tokens
    theirs = [generated(model.handle, call, request) for call in chosen]
    first = [[int((a != b).nonzero()[0]) if bool((a != b).any()) else new for a, b in zip(x, y, strict=True)]
             for x, y in zip(ours, theirs, strict=True)]
    equal = torch.cat([(x == y).flatten() for x, y in zip(ours, theirs, strict=True)]).float().mean()
    return {"equal_share": float(equal), "first_differing_step": first}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--tokenizer", type=Path)
    parser.add_argument("--runs", nargs="+", default=["tiny:float32", "llama-3.1-8b:float32", "llama-3.1-8b:bfloat16"])
    args = parser.parse_args(argv)
    result: dict = {"device": torch.cuda.get_device_name(args.device) if args.device.startswith("cuda") else "cpu",
                    "draw_equals_multinomial": draw_agreement(args.device), "sampler_against_generate": {}}
    for run in args.runs:
        shape, dtype = run.split(":")
        result["sampler_against_generate"][run] = sampler_against_generate(shape, getattr(torch, dtype), args.device,
                                                                           args.tokenizer)
        if args.device.startswith("cuda"):
            torch.cuda.empty_cache()
    args.out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    return result


if __name__ == "__main__":
    print(json.dumps(main(), indent=1))
