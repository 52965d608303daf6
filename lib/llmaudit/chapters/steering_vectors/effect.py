"""Does the vector steer? The causal check: concept scores of held-out texts re-measured under the projection
edit at several lambdas, beside the correlational layer metrics.

The check reads three numbers per text, because a normalised score alone can mislead: s / (P(T+) + P(T-)) reaches
+1 when the edit removes the T- words as surely as when it adds T+ words. So each row carries the raw score
P(T+) - P(T-) (main paper §3.3), the normalised one, and the target words' share of the next-token mass."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from llmaudit.chapters.steering_vectors.concept import ConceptTokens
from llmaudit.errors import AuditError
from llmaudit.models.ask import ask
from llmaudit.models.request import Edit, Keep, Request
from llmaudit.models.vector import SteeringVector

if TYPE_CHECKING:
    from llmaudit.models import AuditModel


def steered_scores(
    model: AuditModel,
    vector: SteeringVector,
    frame: pd.DataFrame,
    tokens: ConceptTokens,
    lambdas: Sequence[float],
    projection: bool = True,
) -> pd.DataFrame:
    """Long table (lam, row, raw, normalised, mass) for `frame`'s prompts: unsteered (lam NaN), then under the
    projection edit (`projection` False: the additive one) at each lambda (one sweep: the lower blocks once for all,
    see `models.passes.sweep`; they are kept, so that the same prompts steered again start above them)."""
    if frame.empty:
        raise AuditError(f"causal check of {vector.name}: no held-out rows to steer (the validation rows used them "
                         "all): lower steering.val_rows or steering.check_rows")
    prompts = [model.chat(inst, prefix) for inst, prefix in zip(frame["instruction"], frame["prefix"])]
    desc = f"causal check {vector.name}{'' if projection else ' (additive)'}"
    edit = Edit(vector=vector, lambdas=[None, *lambdas], projection=projection)
    probs = ask(model, Request(texts=prompts, labels=tokens.ids, edit=edit, keep=Keep(), desc=desc)).probs
    parts = [
        pd.DataFrame({"lam": lam, "row": range(len(prompts)), "raw": tokens.score(p).numpy(),
                      "normalised": tokens.score(p, normalised=True).numpy(), "mass": p.sum(-1).numpy()})
        for lam, p in zip([np.nan, *lambdas], probs)
    ]
    return pd.concat(parts, ignore_index=True)
