"""Edits of the residual stream at one block output, applied at every token position (main paper §3.3).

Projection: h' = h - ((h - mu0) . v) v + alpha v   (alpha = lambda * k; alpha = 0 removes the concept)
Additive:   h' = h + alpha v
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Intervention:
    """A steering edit at block `layer`; projection form when `mean` (mu0) is given, additive otherwise."""

    layer: int
    direction: torch.Tensor
    alpha: float
    mean: torch.Tensor | None = None

    def __call__(self, h: torch.Tensor) -> torch.Tensor:
        """Apply the edit to hidden states of shape (..., width)."""
        v = self.direction.to(h.device, h.dtype)
        if self.mean is None:
            return h + self.alpha * v
        coordinate = (h - self.mean.to(h.device, h.dtype)) @ v
        return h + (self.alpha - coordinate).unsqueeze(-1) * v


def edit_key(intervention: Intervention) -> tuple:
    """What makes two edits compute the same (for the ledger): block, coefficient, direction and, for the
    projection form, the neutral mean, by value (two loads of one vector are one edit)."""
    tensors = [intervention.direction] + ([] if intervention.mean is None else [intervention.mean])
    values = hashlib.sha256(b"".join(t.detach().float().cpu().numpy().tobytes() for t in tensors)).hexdigest()
    return (intervention.layer, intervention.alpha, intervention.mean is None, values)
