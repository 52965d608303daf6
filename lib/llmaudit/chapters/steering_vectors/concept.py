"""Concept scores (main paper §3.3): s(x) = sum p(t in T+) - sum p(t in T-) over the next token after an output
prefix, and the positive / negative / neutral split of texts by that score."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from llmaudit.errors import AuditError

# Which side of each concept is T+ (lambda > 0 steers towards it), keyed as in target_words.json.
POLES = {"gender": ("F", "M"), "race": ("B", "W")}
POLE_NAMES = {"F": "female", "M": "male", "B": "Black", "W": "White"}


def poles(concept: str) -> tuple[str, str]:
    """The concept's two sides in words, T+ first: where lambda = +1 steers and where -1 does ('Black', 'White')."""
    plus, minus = POLES[concept]
    return POLE_NAMES[plus], POLE_NAMES[minus]


@dataclass(frozen=True)
class ConceptTokens:
    """Single-token ids of the positive (T+) and negative (T-) target words of a concept."""

    concept: str
    positive: tuple[int, ...]
    negative: tuple[int, ...]

    @property
    def ids(self) -> list[int]:
        """Label ids in the order `score` expects: T+ then T-."""
        return [*self.positive, *self.negative]

    def score(self, probs: torch.Tensor, normalised: bool = False) -> torch.Tensor:
        """s = P(T+) - P(T-) from (n, len(ids)) label probabilities; `normalised` divides by P(T+) + P(T-), the
        preference among the target words, which equals s for a model that puts its mass on them."""
        n = len(self.positive)
        plus, minus = probs[:, :n].sum(-1), probs[:, n:].sum(-1)
        return (plus - minus) / (plus + minus) if normalised else plus - minus


def concept_tokens(concept: str, words: dict[str, list[str]], single_token_ids) -> ConceptTokens:
    """Build T+ / T- from target words; `single_token_ids` maps words to their one-token forms (model-specific)."""
    if concept not in POLES:
        raise AuditError(f"unknown concept '{concept}': use one of {', '.join(POLES)}")
    plus, minus = (tuple(single_token_ids(words[pole])) for pole in POLES[concept])
    if set(plus) & set(minus):
        raise AuditError(f"{concept}: target tokens {sorted(set(plus) & set(minus))} are on both sides")
    if not plus or not minus:
        raise AuditError(f"{concept}: no target word is a single token for this tokenizer")
    return ConceptTokens(concept, plus, minus)


def thresholds(scores: torch.Tensor, tau: float, quantile: float | None = None) -> tuple[float, float]:
    """Neutral band (low, high): (-tau, tau), or with `quantile` q the q and 1-q quantiles of the scores, so each
    side holds a share q of the texts (for a model whose scores all lean one way; centre the scores first)."""
    if quantile is None:
        return -tau, tau
    low, high = (float(torch.quantile(scores.double(), q)) for q in (quantile, 1 - quantile))
    if not low < 0 < high:
        raise AuditError(f"quantile split {quantile} gives band ({low:.4f}, {high:.4f}) that excludes 0: "
                         "centre the scores")
    return low, high


def split(scores: torch.Tensor, low: float, high: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Boolean masks (positive, negative, neutral): s > high, s < low, and the rest."""
    positive, negative = scores > high, scores < low
    return positive, negative, ~(positive | negative)


def split_counts(scores: Sequence[float] | torch.Tensor, low: float, high: float) -> dict[str, int]:
    """How many texts fall on each side of the neutral band."""
    masks = split(torch.as_tensor(scores), low, high)
    return {name: int(mask.sum()) for name, mask in zip(("positive", "negative", "neutral"), masks)}
