"""Name projection (main paper §5.1, "The gender of <name> is"): how far the model's own gender direction places a first
name. The model is asked to complete "The gender of <name> is" and its answer begins with that sentence, so the prompt
sits in the same chat context the vector was extracted from; the residual stream at the sentence's last token, at the
vector's block, is projected onto the vector (offset by its neutral mean mu0) and compared with the name's real-world
female share p_f. The prompts differ only in the name, so their shared chat beginning runs once."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from llmaudit.chapters.steering_vectors import SteeringVector
from llmaudit.models import AuditModel
from llmaudit.models.ask import ask
from llmaudit.models.passes.required import required
from llmaudit.models.request import Request
from llmaudit.stats import Estimate, pearson

SENTENCE = "The gender of {name} is"


def name_prompt(model: AuditModel, name: str) -> str:
    """The model's input for one name: a request to complete the sentence, answered by the sentence itself."""
    sentence = SENTENCE.format(name=name)
    return model.chat(f"Complete the sentence: {sentence}", sentence)


def name_projections(
    model: AuditModel,
    vector: SteeringVector,
    names: Sequence[str],
) -> np.ndarray:
    """(h - mu0) . v at the last token of each name's sentence."""
    texts = [name_prompt(model, name) for name in names]

    out = ask(model, Request(texts=texts, labels=(), layers=[vector.layer], desc="name projections"))
    acts = required(out.acts, "block outputs")[0, :, 0]
    return vector.project(acts.float()).numpy()


MIXED = (0.1, 0.9)  # names with 0.1 <= p_f < 0.9: the bins between the clearly gendered ones
ALL_NAMES, MIXED_NAMES = "all projected names", f"mixed ({MIXED[0]:g} <= p_f < {MIXED[1]:g})"


def projection_fits(names: pd.DataFrame, shown: pd.DataFrame) -> dict[str, tuple[int, Estimate]]:
    """Pearson r of projection with p_f (Fisher interval) and the number of names, over every projected name (the
    paper's design, the headline), the clearly gendered and the mixed names apart, and the stratified sample the
    figure draws (`shown`); a subset with fewer than 4 names is left out. `names`: columns p_f, projection."""
    mixed = (names["p_f"] >= MIXED[0]) & (names["p_f"] < MIXED[1])
    subsets = {
        ALL_NAMES: names,
        f"clearly gendered (p_f < {MIXED[0]:g} or p_f >= {MIXED[1]:g})": names[~mixed],
        MIXED_NAMES: names[mixed],
        "stratified sample (as drawn)": shown,
    }
    return {label: (len(part), pearson(part["projection"].to_numpy(), part["p_f"].to_numpy()))
            for label, part in subsets.items() if len(part) >= 4}
