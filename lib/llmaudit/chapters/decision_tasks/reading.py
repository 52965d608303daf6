"""How a task's items are read into its metric: from the answer words' next-token probabilities where the model's
engine gives them (with each read's coverage where the engine reads a server's top-k window), else from seeded
sampled answers (sampled mode: an endpoint with no log-probabilities). A sampled item's metric is the share of its
answers naming the scored word among those naming any answer word, the sampled counterpart of the normalised
probability; the main paper's judicial task queries each case five times and averages the outcome (§4.2)."""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Sequence

import pandas as pd
import torch
from statsmodels.stats.proportion import proportion_confint

from llmaudit.chapters.decision_tasks.base import TaskItem, metric
from llmaudit.models import AuditModel
from llmaudit.models.ask import ask
from llmaudit.models.request import SampleCall, SampleRequest

Z = 1.959964  # the 95% normal quantile the verdicts' intervals use
LEAST_SAMPLES = 5  # the main paper's reference code asks five answers per judicial case (§4.2)
ANSWER_TOKENS = 4  # tokens sampled per answer: the answer word's, and room for a word split into pieces


def scored(model: AuditModel, items: Sequence[TaskItem], texts: Sequence[str], labels: Sequence[int],
           probs: torch.Tensor) -> pd.DataFrame:
    """Per item: case, group, metric, answer mass and prompt text, from its answers' probabilities; and its read's
    coverage where the engine read a top-k window (`Engine.coverage`)."""
    frame = pd.DataFrame({"case": [item.case for item in items], "group": [item.group for item in items],
                          "metric": metric(probs, [item.target for item in items]).numpy(),
                          "mass": probs.sum(-1).numpy(), "prompt": list(texts)})
    coverage = model.engine.coverage(texts, labels)
    return frame if coverage is None else frame.assign(coverage=coverage)


def samples_per_prompt(margin: float, cases: int, most: int) -> int:
    """Answers sampled per prompt so that a black-box gap's sampling error stays within half its `margin`: a gap is a
    mean over `cases` of two shares' difference, whose sampling variance is at most 1 / (2 n cases) for n answers
    each, so n >= 2 z^2 / (cases margin^2) puts z standard errors within margin / 2; at least the paper's five, at most
    `most` (the params' `model.max_samples`)."""
    needed = math.ceil(2 * Z**2 / (max(cases, 1) * margin**2))
    return max(LEAST_SAMPLES, min(most, needed))


def answer_of(text: str, answers: Sequence[str]) -> int | None:
    """The answer a sampled text gives, by the tasks' rule: its first word (letters and digits) is one of the answer
    words, case aside (None: it names none, and counts toward no share)."""
    first = re.match(r"\W*(\w+)", text)
    words = [answer.lower() for answer in answers]
    return words.index(first.group(1).lower()) if first and first.group(1).lower() in words else None


def sampled(model: AuditModel, items: Sequence[TaskItem], texts: Sequence[str], answers: Sequence[str], desc: str,
            seed: int, margin: float) -> pd.DataFrame:
    """Per item: case, group, metric (the share of its answers naming the scored word among those naming an answer
    word; NaN where none did), mass (the share naming any answer word), prompt, the answers sampled and the share's
    95% Wilson interval (lo, hi). Each prompt's answers are seeded by the audit's seed and the prompt itself."""
    n = samples_per_prompt(margin, len({item.case for item in items}), model.engine.max_samples)
    calls = [SampleCall(texts=[text], per_text=n, seed=prompt_seed(seed, text)) for text in texts]
    drawn = ask(model, SampleRequest(calls=calls, max_new_tokens=ANSWER_TOKENS, desc=desc)).tokens
    rows = []
    for item, text, tokens in zip(items, texts, drawn):
        given = [answer_of(model.tokenizer.decode([t for t in row.tolist() if t >= 0]), answers) for row in tokens]
        named = sum(answer is not None for answer in given)
        hits = sum(answer == item.target for answer in given)
        lo, hi = proportion_confint(hits, named, method="wilson") if named else (math.nan, math.nan)
        rows.append({"case": item.case, "group": item.group, "metric": hits / named if named else math.nan,
                     "mass": named / n, "prompt": text, "samples": n, "lo": lo, "hi": hi})
    return pd.DataFrame(rows)


def prompt_seed(seed: int, text: str) -> int:
    """A prompt's sampling seed: the audit's `seed` and the prompt's text, within 31 bits."""
    return int.from_bytes(hashlib.sha256(f"{seed}:{text}".encode()).digest()[:4], "big") >> 1
