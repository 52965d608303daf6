"""Weighted mean difference (Cyberey et al. 2025), one candidate direction per layer (main paper §3.3):
mu0 = mean neutral activation; m+- = sum_i w_i (a_i - mu0) with w_i = s_i / sum_j s_j within each side;
v = normalize(normalize(m+) - normalize(m-))."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from llmaudit.chapters.steering_vectors.concept import split
from llmaudit.errors import AuditError


def wmd(acts: torch.Tensor, scores: torch.Tensor, low: float, high: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Unit directions (layers, width) and neutral means mu0 (layers, width) from activations (n, layers, width);
    texts scoring above `high` are positive, below `low` negative, the rest neutral."""
    positive, negative, neutral = split(scores, low, high)
    for name, mask in (("positive", positive), ("negative", negative), ("neutral", neutral)):
        if int(mask.sum()) < 2:
            raise AuditError(
                f"only {int(mask.sum())} {name} training texts with the neutral band ({low:.4f}, {high:.4f}):"
                " change steering.tau or steering.quantile, or add training rows"
            )
    acts, scores = acts.double(), scores.double()
    mean = acts[neutral].mean(0)
    m_pos = _weighted_offset(acts[positive], scores[positive], mean)
    m_neg = _weighted_offset(acts[negative], scores[negative], mean)
    direction = F.normalize(F.normalize(m_pos, dim=-1) - F.normalize(m_neg, dim=-1), dim=-1)
    return direction.float(), mean.float()


def _weighted_offset(acts: torch.Tensor, scores: torch.Tensor, mean: torch.Tensor) -> torch.Tensor:
    """sum_i (s_i / sum_j s_j) (a_i - mu0): the score-weighted mean offset of one side from the neutral mean."""
    weights = scores / scores.sum()
    return torch.einsum("n,nld->ld", weights, acts - mean)
