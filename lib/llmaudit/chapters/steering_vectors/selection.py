"""Choosing and scaling one vector from the per-layer candidates on validation data (main paper §3.3)."""

from __future__ import annotations

import math

import torch


def projections(acts: torch.Tensor, direction: torch.Tensor, mean: torch.Tensor) -> torch.Tensor:
    """p = (a - mu0) . v, broadcasting over leading dims: (n, layers, width) x (layers, width) -> (n, layers)."""
    return ((acts - mean) * direction).sum(-1)


def layer_metrics(p: torch.Tensor, scores: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per layer: Pearson correlation of projection with concept score, and the sign-disagreement penalty
    sep = sqrt(mean(s^2 [sign(s) != sign(p)])). `p` is (n, layers), `scores` (n,)."""
    p, s = p.double(), scores.double().unsqueeze(-1)
    pc, sc = p - p.mean(0), s - s.mean(0)
    corr = (pc * sc).sum(0) / (pc.norm(dim=0) * sc.norm(dim=0))
    sep = ((s**2) * (torch.sign(s) != torch.sign(p))).mean(0).sqrt()
    return corr.float(), sep.float()


def eligible_layers(n_layers: int, skip_last: float) -> int:
    """How many leading layers may be chosen: the last `skip_last` share (rounded up) is dropped."""
    return n_layers - math.ceil(skip_last * n_layers)


def choose_layer(corr: torch.Tensor, sep: torch.Tensor, skip_last: float) -> int:
    """argmax(corr - sep) over the eligible layers."""
    n = eligible_layers(len(corr), skip_last)
    return int(torch.argmax((corr - sep)[:n]))


def scale(p: torch.Tensor, scores: torch.Tensor) -> float:
    """k = |(Q90(p | s>0) - Q10(p | s<0)) / (Q90(s | s>0) - Q10(s | s<0))|: projection units per unit of score."""
    pos, neg = scores > 0, scores < 0
    spread_p = torch.quantile(p[pos].double(), 0.9) - torch.quantile(p[neg].double(), 0.1)
    spread_s = torch.quantile(scores[pos].double(), 0.9) - torch.quantile(scores[neg].double(), 0.1)
    return float((spread_p / spread_s).abs())
