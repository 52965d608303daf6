"""A chosen steering vector with everything later chapters need to reuse it: layer, unit direction v,
neutral mean mu0, scale k, and where it came from. Saved as one safetensors file with JSON metadata and a checksum
over both, checked on every load."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from llmaudit.atomic import write_atomic
from llmaudit.cache import digest
from llmaudit.errors import AuditError
from llmaudit.models.intervention import Intervention
from llmaudit.sealed import Unsealed, seal, unseal


@dataclass
class SteeringVector:
    """Steering direction for `concept` at block `layer`; lambda = +1 moves a text by k towards T+."""

    name: str
    concept: str
    layer: int
    direction: torch.Tensor
    mean: torch.Tensor
    k: float
    meta: dict[str, Any] = field(default_factory=dict)

    def project(self, acts: torch.Tensor) -> torch.Tensor:
        """(a - mu0) . v for activations (..., width) taken at this vector's layer."""
        return (acts - self.mean) @ self.direction

    def intervention(self, lam: float, projection: bool = True) -> Intervention:
        """The edit for coefficient lambda: projection form (sets the coordinate to lambda k) or additive."""
        return Intervention(self.layer, self.direction, lam * self.k, self.mean if projection else None)

    def fingerprint(self) -> list:
        """What determines this vector's edits (block, scale, direction, neutral mean), as part of cache keys."""
        return [self.layer, self.k, digest(self.direction.tolist()), digest(self.mean.tolist())]

    def cosine(self, other: SteeringVector) -> float:
        """Cosine between two unit directions (meaningful only for vectors of the same model)."""
        return float(self.direction @ other.direction)

    def mismatches(self, *, name: str, concept: str, model: str, weights: str, blocks: int, width: int,
                   block: int | None) -> list[str]:
        """Where this vector is not the one a chapter asked for: its recorded name, concept, model (params name and
        weights identity), block (one of the model's `blocks`, and the `block` the steering chapter recorded for it
        where there is one) or width differ from those given; empty where it is that vector."""
        asked = {"name": name, "concept": concept, "model": model, "weights": weights}
        found = {"name": self.name, "concept": self.concept, "model": self.meta.get("model"),
                 "weights": self.meta.get("weights")}
        problems = [f"{key} {found[key]!r}, not {value!r}" for key, value in asked.items() if found[key] != value]
        if not (isinstance(self.layer, int) and 0 <= self.layer < blocks) or block not in (None, self.layer):
            problems.append(f"block {self.layer!r}, not {'one of 0-' + str(blocks - 1) if block is None else block}")
        if tuple(self.direction.shape) != (width,) or tuple(self.mean.shape) != (width,):
            problems.append(f"width {tuple(self.direction.shape)}, not ({width},)")
        return problems

    def save(self, folder: Path) -> Path:
        """Write `<folder>/<name>.safetensors` atomically, with the checksum of its tensors and header
        (`llmaudit.sealed`: the same vector, the same bytes)."""
        folder.mkdir(parents=True, exist_ok=True)
        header = {"name": self.name, "concept": self.concept, "layer": self.layer, "k": self.k, **self.meta}
        tensors = {"direction": self.direction, "mean": self.mean}
        return write_atomic(folder / f"{self.name}.safetensors", seal(tensors, header))

    @classmethod
    def load(cls, path: Path) -> SteeringVector:
        """Read a vector written by `save`; an unreadable file, or one that fails its checksum (damaged or edited),
        is a one-line AuditError naming it, since every white-box number downstream would rest on it."""
        try:
            tensors, header = unseal(path)
        except Unsealed as err:
            raise _damaged(path, str(err)) from None
        if not {"name", "concept", "layer", "k"} <= header.keys() or not {"direction", "mean"} <= tensors.keys():
            raise _damaged(path, "lacks a vector's fields")
        fixed = {key: header.pop(key) for key in ("name", "concept", "layer", "k")}
        return cls(**fixed, direction=tensors["direction"], mean=tensors["mean"], meta=header)


def _damaged(path: Path, problem: str) -> AuditError:
    """The one-line error for a saved vector that cannot be trusted."""
    return AuditError(f"saved vector {path} {problem}: rerun the steering_vectors chapter to save it again")
