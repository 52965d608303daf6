"""Edits of the residual stream at one block output, applied at every token position (main paper §3.3).

Projection: h' = h - ((h - mu0) . v) v + alpha v   (alpha = lambda * k; alpha = 0 removes the concept)
Additive:   h' = h + alpha v
"""

from __future__ import annotations

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
