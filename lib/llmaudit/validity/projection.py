"""Name projection (main paper §5.1, "The gender of <name> is"): how far the model's own gender direction places a first name. The model is
asked to complete "The gender of <name> is" and its answer begins with that sentence, so the prompt sits in the
same chat context the vector was extracted from; the residual stream at the sentence's last token, at the
vector's block, is projected onto the vector (offset by its neutral mean mu0) and compared with the name's
real-world female share p_f. The prompts differ only in the name, so their shared chat beginning runs once."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from llmaudit.cache import cached_tensors
from llmaudit.models import AuditModel
from llmaudit.models.prefix import forward_shared_prefix
from llmaudit.steering import SteeringVector

SENTENCE = "The gender of {name} is"


def name_prompt(model: AuditModel, name: str) -> str:
    """The model's input for one name: a request to complete the sentence, answered by the sentence itself."""
    sentence = SENTENCE.format(name=name)
    return model.chat(f"Complete the sentence: {sentence}", sentence)


def name_projections(
    model: AuditModel, vector: SteeringVector, names: Sequence[str], batch_tokens: int, cache: Path | None = None
) -> np.ndarray:
    """(h - mu0) . v at the last token of each name's sentence."""
    texts = [name_prompt(model, name) for name in names]

    def run() -> dict[str, torch.Tensor]:
        acts = forward_shared_prefix(model, texts, (), [vector.layer], batch_tokens, desc="name projections").acts
        return {"acts": acts[:, 0]}

    acts = cached_tensors(cache, {"model": model.identity, "prompts": texts, "layers": [vector.layer]}, run)["acts"]
    return vector.project(acts.float()).numpy()
