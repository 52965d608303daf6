"""Name projection (SPEC Chapter 4): how far the model's own gender direction places a first name. The model
reads "The gender of <name> is"; the residual stream at the last token, at the vector's block, is projected onto
the vector (offset by its neutral mean mu0), and compared with the name's real-world female share p_f."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from llmaudit.cache import cached_tensors
from llmaudit.models import AuditModel
from llmaudit.steering import SteeringVector

SENTENCE = "The gender of {name} is"


def name_projections(
    model: AuditModel, vector: SteeringVector, names: Sequence[str], batch_tokens: int, cache: Path | None = None
) -> np.ndarray:
    """(h - mu0) . v for each name's sentence, read as plain text (a completion, no chat template)."""
    texts = [model.plain(SENTENCE.format(name=name)) for name in names]

    def run() -> dict[str, torch.Tensor]:
        acts = model.forward(texts, (), layers=[vector.layer], batch_tokens=batch_tokens, desc="name projections").acts
        return {"acts": acts[:, 0]}

    acts = cached_tensors(cache, {"model": model.identity, "prompts": texts, "layers": [vector.layer]}, run)["acts"]
    return vector.project(acts.float()).numpy()
