"""Does the vector steer? Concept scores of held-out texts re-measured under the intervention at several
lambdas: a causal check of the direction, beside the correlational layer metrics."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd
import torch

from llmaudit.cache import cached_tensors
from llmaudit.steering.concept import ConceptTokens
from llmaudit.steering.vector import SteeringVector

if TYPE_CHECKING:
    from llmaudit.models import AuditModel


def steered_scores(
    model: AuditModel,
    vector: SteeringVector,
    frame: pd.DataFrame,
    tokens: ConceptTokens,
    lambdas: Sequence[float],
    batch_tokens: int,
    cache: Path | None = None,
    normalised: bool = False,
) -> pd.DataFrame:
    """Long table (lam, row, score, mass) of concept scores of `frame`'s prompts under the projection edit."""
    prompts = [model.chat(inst, prefix) for inst, prefix in zip(frame["instruction"], frame["prefix"])]
    parts = []
    for lam in lambdas:
        edit = vector.intervention(lam)
        key = {
            "model": model.identity,
            "prompts": prompts,
            "labels": tokens.ids,
            "edit": [edit.alpha, *vector.fingerprint()],
        }

        def run(edit=edit) -> dict[str, torch.Tensor]:
            return {"probs": model.forward(prompts, tokens.ids, intervention=edit, batch_tokens=batch_tokens).probs}

        probs = cached_tensors(cache, key, run)["probs"]
        parts.append(pd.DataFrame({"lam": lam, "row": range(len(prompts)), "score": tokens.score(probs, normalised).numpy(),
                                   "mass": probs.sum(-1).numpy()}))
    return pd.concat(parts, ignore_index=True)
