"""Run BBQ on one model as several "systems" (the model as it is, and the model steered along a vector at each
lambda): per question the option probabilities and the argmax answer, and last-token representations at chosen
relative depths for CKA (saved in the report folder by `similarity.saved`, so later audits of other models can
compare with it)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import torch

from llmaudit.cache import cached_tensors
from llmaudit.models import AuditModel
from llmaudit.similarity.bbq import LETTERS, prompt
from llmaudit.similarity.saved import QUESTION
from llmaudit.steering import SteeringVector
from llmaudit.tasks.base import answer_ids

def system_name(model: str, vector: SteeringVector | None, lam: float) -> str:
    """How a system is labelled across reports: the model's name, plus the steering when there is one."""
    return model if vector is None else f"{model} {vector.name} λ={lam:+g}"


def blocks_at(depths: list[float], n_layers: int) -> list[int]:
    """The blocks at relative depths in [0, 1] (0 = first block, 1 = last)."""
    return [round(d * (n_layers - 1)) for d in depths]


def question_texts(model: AuditModel, questions: pd.DataFrame) -> list[str]:
    """The exact prompt the model reads for each BBQ question (chat turn and answer prefix), in row order."""
    return [model.chat(*prompt(row)) for row in questions.to_dict("records")]


def run_systems(
    model: AuditModel, questions: pd.DataFrame, vector: SteeringVector | None, lambdas: list[float],
    depths: list[float],
    *, batch_tokens: int, cache: Path | None = None,
) -> tuple[pd.DataFrame, dict[str, torch.Tensor]]:
    """Answers of the plain model and of the model steered at each lambda (one traced pass each, which also reads
    the representations), and representations keyed 'system|depth'."""
    texts = question_texts(model, questions)
    labels, layers = answer_ids(model.tokenizer, LETTERS), blocks_at(depths, model.n_layers)
    frames, reps = [], {}
    for lam in [None, *lambdas]:
        edit = None if lam is None else vector.intervention(lam)
        name = system_name(model.name, None if lam is None else vector, lam or 0.0)
        key = {"model": model.identity, "prompts": texts, "labels": labels, "layers": layers,
               "edit": None if edit is None else [lam, *vector.fingerprint()]}

        def run() -> dict[str, torch.Tensor]:
            out = model.forward(texts, labels, layers, edit, batch_tokens=batch_tokens, desc=f"BBQ {name}")
            return {"probs": out.probs, "acts": out.acts}

        result = cached_tensors(cache, key, run)
        probs = result["probs"]
        frame = questions[QUESTION].assign(system=name, pred=probs.argmax(-1).numpy(), mass=probs.sum(-1).numpy())
        for i, letter in enumerate(LETTERS):
            frame[f"p_{letter}"] = (probs[:, i] / probs.sum(-1)).numpy()
        frames.append(frame)
        reps |= {f"{name}|{depth:g}": result["acts"][:, j].contiguous() for j, depth in enumerate(depths)}
    return pd.concat(frames, ignore_index=True), reps
