"""The markedness chapter's runs (paper 004 §3.4): zero-shot, 9-shot per demonstration pool and zero-shot
chain-of-thought, each once per seed of the paper's five (the demonstrations redrawn and every generation seeded
per seed), answered by sampling as the paper does or by the argmax reading; one table of predictions for all."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from llmaudit.chapters.markedness.decoding import with_fallback
from llmaudit.chapters.markedness.evaluate import classify
from llmaudit.chapters.markedness.prompts import Example, demonstration_pool, demonstrations
from llmaudit.chapters.markedness.sampled import Sampling, sample_classify
from llmaudit.chapters.steering_vectors import SteeringVector
from llmaudit.models import AuditModel
from llmaudit.models.sampling.release import Decoding, release_decoding

ZERO_SHOT, NINE_SHOT, COT = "zero-shot", "9-shot", "zero-shot-cot"


@dataclass(frozen=True)
class Run:
    """One classifier: its regime, the seed of its demonstrations and generations, its demonstrations (none for
    zero-shot) and whether it reasons first."""

    regime: str
    seed: int
    demos: tuple[tuple[str, str], ...] = ()
    cot: bool = False


def regime(pool: str, first: bool) -> str:
    """The 9-shot regime of a demonstration pool: "9-shot" for the first pool (the one the gates read), else
    "9-shot-<pool>"."""
    return NINE_SHOT if first else f"{NINE_SHOT}-{pool}"


def plan(sizes: Any, mirror: str | Path | None) -> list[Run]:
    """The runs of a params section `sizes` (MarkednessParams): zero-shot once per seed when sampled (once, at the
    first seed, with the deterministic argmax reading), 9-shot per pool and seed, and chain-of-thought per seed
    when asked for."""
    zero = sizes.seeds if sizes.decoding == "sampled" else sizes.seeds[:1]
    runs = [Run(ZERO_SHOT, seed) for seed in zero]
    for k, pool in enumerate(sizes.pools):
        drawn = demonstration_pool(pool, mirror)
        runs += [Run(regime(pool, k == 0), seed, tuple(demonstrations(drawn, seed))) for seed in sizes.seeds]
    return runs + [Run(COT, seed, cot=True) for seed in sizes.seeds if sizes.cot]


def sampler_decoding(model: AuditModel, sizes: Any) -> Decoding:
    """The sampler's settings for a params section `sizes`: "pipeline", what the paper's text-generation pipeline
    samples with at its temperature (the model's generation config over transformers' defaults: top-k 50, the
    model's top-p; §3.4), or "full_vocabulary", the temperature over the whole vocabulary (ours)."""
    if sizes.sampler == "pipeline":
        return release_decoding(model, temperature=sizes.temperature)
    return Decoding(temperature=sizes.temperature)


def classify_run(model: AuditModel, examples: Sequence[Example], run: Run, sizes: Any, *,
                 vector: SteeringVector | None = None) -> pd.DataFrame:
    """One run's predictions (columns of `evaluate.classify`, plus regime, run = the seed, pred_argmax: the argmax
    reading, pred_parsed: the label read, None when unparsable, and pred_fallback: the paper's random label in its
    place); pred is pred_fallback under `unparsable: random_label` (the paper's), else pred_parsed (the argmax
    reading when not sampled). Prompts in `sizes.form`."""
    return classify_runs(model, examples, [run], sizes, vector=vector)[0]


def classify_runs(model: AuditModel, examples: Sequence[Example], runs: Sequence[Run], sizes: Any, *,
                  vector: SteeringVector | None = None) -> list[pd.DataFrame]:
    """`classify_run` of each run, in order, `vector`'s projection in the first's. Sampled runs of one regime with
    the same demonstrations (zero-shot's and chain-of-thought's seeds: the same prompts) sample in one request, so
    each prompt runs once for all their seeds; each seed's answers are those of its run alone (its own streams).
    Those without demonstrations run first, zero-shot's kept for chain-of-thought's reasoning prompts, which begin
    as its prompts do (`SampleRequest.followed`)."""
    groups: dict[tuple, list[int]] = {}
    for k, run in enumerate(runs):
        alike = sizes.decoding == "sampled" and not run.demos
        groups.setdefault((run.regime, run.demos, run.cot) if alike else (k,), []).append(k)
    frames: dict[int, pd.DataFrame] = {}
    cot = any(run.cot for run in runs)
    for members in sorted(groups.values(), key=lambda members: bool(runs[members[0]].demos)):
        read = vector if 0 in members else None
        chosen = [runs[k] for k in members]
        if sizes.decoding == "sampled":
            sampling = [Sampling(run.seed, sampler_decoding(model, sizes), sizes.max_new_tokens,
                                 sizes.reasoning_tokens if run.cot else None) for run in chosen]
            followed = cot and not chosen[0].cot and not chosen[0].demos
            found = sample_classify(model, examples, chosen[0].demos, runs=sampling, template=sizes.template,
                                    form=sizes.form, vector=read, followed=followed)
        else:
            frame = classify(model, examples, chosen[0].demos, template=sizes.template, form=sizes.form, vector=read)
            found = [frame.assign(pred_argmax=frame["pred"])]
        frames.update({k: _finished(frame, runs[k], sizes) for k, frame in zip(members, found)})
    return [frames[k] for k in range(len(runs))]


def _finished(frame: pd.DataFrame, run: Run, sizes: Any) -> pd.DataFrame:
    """A run's table with its regime, seed, parsed label and the paper's fallback (`classify_run`)."""
    filled = with_fallback(frame["pred"].tolist(), run.seed)
    return frame.assign(regime=run.regime, run=str(run.seed), pred_parsed=frame["pred"], pred_fallback=filled,
                        pred=filled if sizes.unparsable == "random_label" else frame["pred"])
