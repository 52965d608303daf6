"""How an endpoint's answers are read, probed once at the start with one request: `top-k` where the server returns
the log-probabilities of the next token's k likeliest tokens (vLLM and SGLang up to their `--max-logprobs`, llama.cpp's
server, hosted APIs up to 20), `sampled` where it returns none (`transformers serve`, reasoning models' APIs). A top-k
read is *exact* for a case whose answer words all lie in the window: their probabilities are then the model's own, as a
local pass reads them. An answer word outside the window is read as 0 (its probability is below the window's last),
and the case's coverage, the least share of the answer words' mass the words found hold, is reported with it; a test
with a case below the params' `model.min_coverage` is not measurable (the decision tasks say so). Never scored by
echoing the prompt: llama.cpp's server ignores echoed prompts' log-probabilities (echo-scoring sits at chance)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

PROBE = "The capital of France is"  # any prompt: the probe asks for one token and its log-probabilities


class Mode(StrEnum):
    """The reading modes a chapter's card records: exact (every answer word in the window), top-k (some outside, with
    the coverage reported), sampled (no log-probabilities: shares of sampled answers)."""

    EXACT = "exact"
    TOP_K = "top-k"
    SAMPLED = "sampled"


@dataclass(frozen=True, kw_only=True)
class Reading:
    """What the probe found: the log-probabilities window per position (0: none, sampled mode) and the server's
    `system_fingerprint` at the start (None where it gives none)."""

    window: int
    fingerprint: str | None

    @property
    def mode(self) -> Mode:
        """The mode the server allows at best (a chapter's cases may lower exact to top-k)."""
        return Mode.EXACT if self.window else Mode.SAMPLED


def probe_body(model: str, window: int) -> dict[str, Any]:
    """The probe's request: one greedy token of a fixed prompt with `window` log-probabilities."""
    return {"model": model, "prompt": PROBE, "max_tokens": 1, "temperature": 0.0, "logprobs": window}


def window_of(reply: Mapping[str, Any]) -> int:
    """How many log-probabilities per position a completion's reply holds (0: none)."""
    logprobs = reply["choices"][0].get("logprobs") or {}
    top = logprobs.get("top_logprobs") or []
    return len(top[0]) if top and top[0] else 0


@dataclass(frozen=True)
class Read:
    """One case's answer words read from a top-k window: their probabilities (0 outside the window), the share of
    the answer words' mass the read is sure to cover (`coverage`), and how many lay outside."""

    probs: list[float]
    coverage: float
    outside: int


def read_answers(reply: Mapping[str, Any], words: Sequence[str]) -> Read:
    """The probabilities of the answer `words` (token strings as the server spells them) at the completion's first
    position. A word outside the window has a probability below the window's last, so the words found hold at least
    `coverage` = found / (found + outside x last) of the answer words' mass, and the metric read from them (a share of
    that mass) is off by at most 1 - coverage."""
    window: dict[str, float] = (reply["choices"][0]["logprobs"]["top_logprobs"] or [{}])[0]
    probs = [math.exp(window[word]) if word in window else 0.0 for word in words]
    outside = sum(word not in window for word in words)
    unseen = outside * math.exp(min(window.values())) if window else float(outside)
    found = sum(probs)
    return Read(probs, found / (found + unseen) if found + unseen > 0 else 0.0, outside)
