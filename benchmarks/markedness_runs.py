"""Where markedness's sampled token-blocks go on the scale test's setup (the tiny stand-in built as
tests/scale/test_paper_size.py builds it, the scale test's markedness overrides): each probe set's runs through
`classify_runs` as the chapter calls it, one ledger for all (as the chapter's kernel keeps it), and per sampling
request its actual and minimum token-blocks split by cause: prefill padding, prompt tokens run more than once (a
second seed, a step re-run, a beginning run again), decoding rows whose answer had ended, and the rest. The answers
and label probabilities are saved to compare two versions of the sampler.
Usage: python benchmarks/markedness_runs.py OUT.pt OUT.json [SET ...]   (LLMAUDIT_DATA: the data mirror)"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
import yaml

from llmaudit.chapters.markedness.prompts import probe_set
from llmaudit.chapters.markedness.protocol import classify_runs, plan
from llmaudit.config import load_params, standin_params
from llmaudit.data.store import data_dir
from llmaudit.ledger import Ledger, prefix_hashes
from llmaudit.models import load_model
from llmaudit.models.loading import architectures
from llmaudit.models.loading.standin import build
from llmaudit.models.sampling import batched
from llmaudit.paths import PARAMS_DIR

PROFILE = PARAMS_DIR / "llama-3.1-8b-instruct.yaml"
SCALE = {"reasoning_tokens": 8, "all_terms": False, "seeds": [2024, 2025], "templates": {"ns_prompts": 222}}
SETS = ("amazon", "ns_prompts", "regard")


def scale_params(root: Path) -> Path:
    """The scale test's params file for the tiny stand-in (its markedness overrides), written under `root`."""
    params = standin_params(PROFILE, build("tiny", root / "model"), "float32")
    params["markedness"] = {**params.get("markedness", {}), **SCALE}
    path = root / "scale.yaml"
    path.write_text(yaml.safe_dump(params), encoding="utf-8")
    return path


class Causes:
    """Per sampling request, its ledger counts and the token-blocks of each cause, from the decoder's own inputs."""

    def __init__(self, model: Any) -> None:
        self.model, self.requests, self.passes = model, [], []
        architectures.decoder(model.hf).register_forward_pre_hook(self._seen, with_kwargs=True)
        self.inner = batched._sample_together
        batched._sample_together = self._request

    def _seen(self, module: Any, args: tuple, kwargs: dict) -> None:
        ids = kwargs.get("input_ids", args[0] if args else None)
        mask = kwargs.get("attention_mask")
        real = ids.numel() if mask is None else int(mask[:, -ids.shape[1]:].sum())
        self.passes.append((tuple(ids.shape), real))

    def _request(self, model: Any, request: Any, budget: int, prefixes: Any) -> Any:
        ledger, blocks = model.ledger, self.model.n_layers
        encoded = model.encode(request.texts)
        fresh = {h for ids in encoded for h in prefix_hashes(ids) if ledger._depth.get(h, 0) < blocks}
        before, self.passes = (ledger.actual, ledger.minimum), []
        out = self.inner(model, request, budget, prefixes)
        actual, minimum = ledger.actual - before[0], ledger.minimum - before[1]
        prefill = [(shape, real) for shape, real in self.passes if shape[1] > 1]
        decode = [shape[0] for shape, _ in self.passes if shape[1] == 1]
        live = sum(min(int((row >= 0).sum()), request.max_new_tokens - 1) for t in out.tokens for row in t)
        ran = sum(real for _, real in prefill)
        self.requests.append({
            "desc": request.desc, "seeds": sorted({call.seed // 1_000_003 for call in request.calls}),
            "texts": len(request.texts), "actual": actual, "minimum": minimum,
            "prompt_minimum": len(fresh) * blocks, "answer_minimum": minimum - len(fresh) * blocks,
            "padding": sum(shape[0] * shape[1] - real for shape, real in prefill) * blocks,
            "prompt_rerun": ran * blocks - len(fresh) * blocks,
            "ended_rows_decoding": (sum(decode) - live) * blocks,
            "decode_over_answer_minimum": (live * blocks) - (minimum - len(fresh) * blocks)})
        return out


def main(out: str, summary: str, *sets: str) -> None:
    with tempfile.TemporaryDirectory() as root:
        params = load_params(scale_params(Path(root)))
        sizes, mirror = params.markedness, data_dir()
        model = load_model(params.name, params.model)
        causes = Causes(model)
        runs = plan(sizes, mirror)
        found: dict[str, Any] = {}
        model.ledger = Ledger(model.n_layers)
        for name in sets or SETS:
            examples = probe_set(name, mirror, sizes.templates.get(name), params.seed, sizes.all_terms)
            first, start = len(causes.requests), time.perf_counter()
            frames = classify_runs(model, examples, runs, sizes)
            seconds = time.perf_counter() - start
            requests = causes.requests[first:]
            totals = {key: sum(r[key] for r in requests) for key in requests[0] if key not in ("desc", "seeds")}
            print(f"{name:12s} {seconds:7.1f} s  actual {totals['actual']:10,d}  minimum {totals['minimum']:10,d}  "
                  f"ratio {totals['actual'] / totals['minimum']:.3f}", flush=True)
            found[name] = {"seconds": round(seconds, 1), "sentences": len(examples), **totals, "requests": requests,
                           "runs": {f"{run.regime} {run.seed}": {
                               "answer": list(frame["answer"]), "reasoning": list(frame["reasoning"]),
                               "probs": torch.tensor(frame[[c for c in frame.columns if c.startswith("p_")]]
                                                     .to_numpy())} for run, frame in zip(runs, frames)}}
    torch.save(found, out)
    Path(summary).write_text(json.dumps({name: {k: v for k, v in d.items() if k != "runs"}
                                         for name, d in found.items()}, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main(*sys.argv[1:])
