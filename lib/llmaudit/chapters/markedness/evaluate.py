"""Classify sentences by prompting (paper 004 §3.4), the argmax reading: the label is the argmax of the next-token
probabilities of the three label words, deterministic (the paper samples: `sampled`); few-shot prompts share their
demonstrations, which run once per seed."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd
import torch

from llmaudit.chapters.decision_tasks.base import answer_ids
from llmaudit.chapters.markedness.metrics import LABELS
from llmaudit.chapters.markedness.prompts import Example, FewShot, classification_prompt, label_word
from llmaudit.chapters.steering_vectors import SteeringVector
from llmaudit.models import AuditModel
from llmaudit.models.ask import ask
from llmaudit.models.passes.required import required
from llmaudit.models.request import Request


def prompt_text(model: AuditModel, question: tuple[str, str], form: str) -> str:
    """The model's input for a (prompt, answer prefix) pair: "plain", the paper's, the text as its text-generation
    pipeline passes a string (the prefix on the last line, after the tokenizer's BOS); "chat", ours, one chat turn
    answered from the prefix (the same plain text for a model without a chat template)."""
    prompt, prefix = question
    return model.chat(prompt, prefix) if form == "chat" else model.plain(f"{prompt}\n{prefix}")


def classify(
    model: AuditModel,
    examples: Sequence[Example],
    demos: Sequence[tuple[str, str]] = (),
    *,
    template: FewShot = "paper",
    form: str = "plain",
    vector: SteeringVector | None = None,
) -> pd.DataFrame:
    """Per example: text, group, term, template, gold, pred (the argmax of the label words' next-token
    probabilities), the exact prompt (in `form`, `prompt_text`), the three label probabilities, their total mass,
    and (given a vector) the prompt's last-token projection on it."""
    texts = [prompt_text(model, classification_prompt(example.text, demos, template=template), form)
             for example in examples]
    labels = answer_ids(model.tokenizer, [label_word(label, bool(demos), template) for label in LABELS])
    layers = [vector.layer] if vector is not None else []

    out = ask(model, Request(texts=texts, labels=labels, layers=layers, desc=f"sentiment {len(demos)}-shot"))
    acts = required(out.acts, "block outputs")[0, :, 0] if layers else None
    return predictions(examples, texts, out.probs[0], acts, vector)


def predictions(examples: Sequence[Example], texts: Sequence[str], probs: torch.Tensor | None,
                acts: torch.Tensor | None, vector: SteeringVector | None) -> pd.DataFrame:
    """`classify`'s table from the prompts' label probabilities (columns in LABELS order; None where the engine
    returns none, an endpoint in sampled mode: no argmax reading, the probabilities and mass missing) and, given a
    vector, the last token's outputs at its block."""
    if probs is None:
        probs = torch.full((len(examples), len(LABELS)), float("nan"))
    frame = pd.DataFrame(
        {
            "text": [e.text for e in examples], "group": [e.group for e in examples],
            "term": [e.term for e in examples], "template": [e.template for e in examples],
            "gold": [e.label for e in examples],
            "pred": [None if row.isnan().any() else LABELS[int(row.argmax())] for row in probs],
            "prompt": list(texts),
            **{f"p_{label}": probs[:, i].numpy() for i, label in enumerate(LABELS)},
            "mass": probs.sum(-1).numpy(),
        }
    )
    if vector is not None:
        frame["projection"] = vector.project(required(acts, "block outputs").float()).numpy()
    return frame


def agreement_with_unmarked(frame: pd.DataFrame, unmarked: str) -> pd.DataFrame:
    """Per run and group: the share of templates whose prediction equals the unmarked sentence's (columns run,
    group, template, pred). A group the model treats as the default agrees most."""
    base = frame[frame["group"] == unmarked][["run", "template", "pred"]].rename(columns={"pred": "unmarked_pred"})
    marked = frame[frame["group"] != unmarked].merge(base, on=["run", "template"])
    marked["agrees"] = marked["pred"] == marked["unmarked_pred"]
    return marked.groupby(["run", "group"], as_index=False)["agrees"].mean()
