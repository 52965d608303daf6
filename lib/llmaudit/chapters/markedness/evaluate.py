"""Classify sentences by prompting (paper 004 §3.4): the label is the argmax of the next-token probabilities of
the three label words, deterministic; few-shot prompts share their demonstrations, which run once per seed."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from llmaudit.chapters.decision_tasks.base import answer_ids
from llmaudit.chapters.markedness.metrics import LABELS
from llmaudit.chapters.markedness.prompts import Example, classification_prompt
from llmaudit.chapters.steering_vectors import SteeringVector
from llmaudit.models import AuditModel
from llmaudit.models.memory import BatchTokens
from llmaudit.models.required import required
from llmaudit.models.steer import steered


def classify(
    model: AuditModel,
    examples: Sequence[Example],
    demos: Sequence[tuple[str, str]] = (),
    *,
    batch_tokens: BatchTokens,
    cache: Path | None = None,
    vector: SteeringVector | None = None,
) -> pd.DataFrame:
    """Per example: text, group, term, template, gold, pred, the exact prompt, the three label probabilities, their
    total mass, and (given a vector) the prompt's last-token projection on it."""
    texts = [model.chat(*classification_prompt(example.text, demos)) for example in examples]
    labels = answer_ids(model.tokenizer, LABELS)
    layers = [vector.layer] if vector is not None else []

    out = steered(model, texts=texts, labels=labels, layers=layers, cache=cache, batch_tokens=batch_tokens,
                  desc=f"sentiment {len(demos)}-shot")
    probs = out.probs[0]
    frame = pd.DataFrame(
        {
            "text": [e.text for e in examples], "group": [e.group for e in examples],
            "term": [e.term for e in examples], "template": [e.template for e in examples],
            "gold": [e.label for e in examples], "pred": [LABELS[i] for i in probs.argmax(-1).tolist()],
            "prompt": texts,
            **{f"p_{label}": probs[:, i].numpy() for i, label in enumerate(LABELS)},
            "mass": probs.sum(-1).numpy(),
        }
    )
    if vector is not None:
        frame["projection"] = vector.project(required(out.acts, "block outputs")[0, :, 0].float()).numpy()
    return frame


def agreement_with_unmarked(frame: pd.DataFrame, unmarked: str) -> pd.DataFrame:
    """Per run and group: the share of templates whose prediction equals the unmarked sentence's (columns run,
    group, template, pred). A group the model treats as the default agrees most."""
    base = frame[frame["group"] == unmarked][["run", "template", "pred"]].rename(columns={"pred": "unmarked_pred"})
    marked = frame[frame["group"] != unmarked].merge(base, on=["run", "template"])
    marked["agrees"] = marked["pred"] == marked["unmarked_pred"]
    return marked.groupby(["run", "group"], as_index=False)["agrees"].mean()
