"""Classify sentences by sampled answers, paper 004 §3.4's protocol: each prompt answered once per run at the run's
seed and decoding, for a few tokens, the label read by string match (`decoding.parse_label`); zero-shot
chain-of-thought first samples the reasoning, then the answer after it (Appendix B.3). The sampler's prefill also
gives the next-token probabilities of the label words, so the argmax reading comes with every run at no cost."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import pandas as pd
import torch

from llmaudit.capabilities import Capability
from llmaudit.chapters.decision_tasks.base import answer_ids
from llmaudit.chapters.markedness.decoding import parse_label
from llmaudit.chapters.markedness.evaluate import predictions, prompt_text
from llmaudit.chapters.markedness.metrics import LABELS
from llmaudit.chapters.markedness.prompts import (
    Example,
    FewShot,
    classification_prompt,
    label_word,
    reasoned_prompt,
    reasoning_prompt,
)
from llmaudit.chapters.steering_vectors import SteeringVector
from llmaudit.models import AuditModel
from llmaudit.models.ask import ask
from llmaudit.models.passes.required import required
from llmaudit.models.request import SampleCall, SampleRequest
from llmaudit.models.sampling.release import Decoding

_STREAMS = 1_000_003  # a run's seed times this, plus the prompt's index, seeds the prompt's random stream


@dataclasses.dataclass(frozen=True)
class Sampling:
    """One run's sampling: its seed, the sampler's settings (`protocol.sampler_decoding`), the answer's length and,
    for chain-of-thought, the reasoning's (None: no reasoning step)."""

    seed: int
    decoding: Decoding = Decoding(temperature=0.8)
    max_new_tokens: int = 3
    reasoning_tokens: int | None = None


def sample_texts(model: AuditModel, texts: Sequence[Sequence[str]], runs: Sequence[Sampling], new: int, *,
                 labels: list[int] | None, layers: list[int], desc: str,
                 followed: bool = False) -> list[tuple[list[str], dict[str, torch.Tensor]]]:
    """Per run, one sampled answer per text of its own (`texts`, a list per run; the text's stream of the run's
    seed) decoded to a string, with the texts' label probabilities (given `labels`) and block outputs of `layers`
    from the same prefill: all runs in one request (`models.ask`: batches cached on their own under the model's
    runtime, its token budget and cache), so a prompt the runs share runs once. `followed`: later texts continue
    these answers (`SampleRequest.followed`). The runs share their decoding."""
    calls = [SampleCall(texts=(text,), per_text=1, seed=run.seed * _STREAMS + i)
             for run, own in zip(runs, texts, strict=True) for i, text in enumerate(own)]
    decoding = runs[0].decoding
    out = ask(model, SampleRequest(calls=calls, max_new_tokens=new, temperature=decoding.temperature,
                                   top_k=decoding.top_k, top_p=decoding.top_p, labels=labels, layers=layers, desc=desc,
                                   followed=followed))
    tokens = torch.cat(list(out.tokens))
    found, start = [], 0
    for own in texts:
        rows = slice(start, start + len(own))
        start += len(own)
        read = {"tokens": tokens[rows]}
        if labels is not None:
            read["probs"] = out.probs[0][rows]
        if layers:
            read["acts"] = required(out.acts, "block outputs")[0, rows, 0]
        answers = [model.tokenizer.decode([t for t in row.tolist() if t >= 0], skip_special_tokens=True)
                   for row in read["tokens"]]
        found.append((answers, read))
    return found


def sample_classify(
    model: AuditModel, examples: Sequence[Example], demos: Sequence[tuple[str, str]] = (), *,
    runs: Sequence[Sampling], template: FewShot = "paper", form: str = "plain", vector: SteeringVector | None = None,
    followed: bool = False,
) -> list[pd.DataFrame]:
    """Per run (seeds of one regime and demonstrations: the same prompts, sampled together by `sample_texts`),
    `evaluate.classify`'s table from sampled answers (prompts in `form`): pred is the label the answer names
    (None: unparsable), pred_argmax the argmax reading of the same prompt (None where the engine reads no
    probabilities: an endpoint in sampled mode), answer the sampled text and reasoning the chain-of-thought step's
    (empty without one); `vector`'s projection in the first run's table; `followed`: later prompts begin as these
    (`SampleRequest.followed`: chain-of-thought's reasoning prompts begin as zero-shot's)."""
    first = runs[0]
    layers = [vector.layer] if vector is not None else []
    reasonings = [[""] * len(examples) for _ in runs]
    if first.reasoning_tokens is not None:
        asked = [prompt_text(model, reasoning_prompt(e.text), form) for e in examples]
        reasonings = [answers for answers, _ in sample_texts(model, [asked] * len(runs), runs, first.reasoning_tokens,
                                                             labels=None, layers=[], desc="sentiment reasoning",
                                                             followed=True)]
        texts = [[prompt_text(model, reasoned_prompt(e.text, r), form) for e, r in zip(examples, own)]
                 for own in reasonings]
    else:
        texts = [[prompt_text(model, classification_prompt(e.text, demos, template=template), form)
                  for e in examples]] * len(runs)
    words = [label_word(label, bool(demos), template) for label in LABELS]
    labels = answer_ids(model.tokenizer, words) if model.engine.can(Capability.PROBABILITIES) else None
    found = sample_texts(model, texts, runs, first.max_new_tokens, labels=labels, layers=layers,
                         desc=f"sentiment {len(demos)}-shot sampled", followed=followed)
    frames = []
    for k, ((answers, read), own, reasoning) in enumerate(zip(found, texts, reasonings)):
        frame = predictions(examples, own, read.get("probs"), read.get("acts"), vector if k == 0 else None)
        frames.append(frame.assign(pred_argmax=frame["pred"], pred=[parse_label(a) for a in answers],
                                   answer=answers, reasoning=reasoning))
    return frames
