"""A chosen steering vector with everything later chapters need to reuse it: layer, unit direction v,
neutral mean mu0, scale k, and where it came from. Saved as one safetensors file with JSON metadata and a checksum
over both, checked on every load."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import save

from llmaudit.atomic import write_atomic
from llmaudit.cache import digest, tensors_sha256
from llmaudit.errors import AuditError
from llmaudit.models.intervention import Intervention


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

    def save(self, folder: Path) -> Path:
        """Write `<folder>/<name>.safetensors` atomically, with the checksum of its tensors and header."""
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{self.name}.safetensors"
        header = json.dumps({"name": self.name, "concept": self.concept, "layer": self.layer, "k": self.k, **self.meta})
        tensors = {"direction": self.direction.contiguous(), "mean": self.mean.contiguous()}
        metadata = {"llmaudit": header, "sha256": tensors_sha256(tensors, header)}
        return write_atomic(path, save(tensors, metadata=metadata))

    @classmethod
    def load(cls, path: Path) -> SteeringVector:
        """Read a vector written by `save`; an unreadable file, or one that fails its checksum (damaged or edited),
        is a one-line AuditError naming it, since every white-box number downstream would rest on it."""
        try:
            with safe_open(str(path), framework="pt") as handle:
                stored = handle.metadata() or {}
                tensors = {name: handle.get_tensor(name) for name in ("direction", "mean")}
        except (OSError, SafetensorError) as err:
            raise _damaged(path, f"is unreadable ({' '.join(str(err).split())})") from None
        text = stored.get("llmaudit", "")
        if stored.get("sha256") != tensors_sha256(tensors, text):
            raise _damaged(path, "fails its checksum")
        header = json.loads(text)
        fixed = {key: header.pop(key) for key in ("name", "concept", "layer", "k")}
        return cls(**fixed, direction=tensors["direction"], mean=tensors["mean"], meta=header)


def _damaged(path: Path, problem: str) -> AuditError:
    """The one-line error for a saved vector that cannot be trusted."""
    return AuditError(f"saved vector {path} {problem}: rerun the steering_vectors chapter to save it again")
