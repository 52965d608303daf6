"""Run BBQ on one model as several "systems" (the model as it is, and the model steered along a vector at each
lambda, one sweep): per question the option probabilities and the argmax answer, and last-token representations at
chosen relative depths for CKA (saved in the report folder by `similarity.saved`, so later audits of other models can
compare with it)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import torch

from llmaudit.models.memory import BatchTokens
from llmaudit.cache import cached_tensors
from llmaudit.models import AuditModel
from llmaudit.models.sweep import sweep_outputs
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
    *, batch_tokens: BatchTokens, cache: Path | None = None,
) -> tuple[pd.DataFrame, dict[str, torch.Tensor]]:
    """Answers of the plain model and of the model steered at each lambda, with the representations they read,
    keyed 'system|depth'. The systems run as one sweep (the blocks below the steering block once for all of them);
    without a vector, the plain model alone."""
    texts = question_texts(model, questions)
    labels, layers = answer_ids(model.tokenizer, LETTERS), blocks_at(depths, model.n_layers)
    swept = [None, *lambdas] if vector is not None else [None]
    key = {"model": model.identity, "prompts": texts, "labels": labels, "layers": layers, "lambdas": swept,
           "vector": None if vector is None else vector.fingerprint()}

    def run() -> dict[str, torch.Tensor]:
        if vector is None:
            out = model.forward(texts, labels, layers, batch_tokens=batch_tokens, desc="BBQ")
            return {"probs": out.probs[None], "acts": out.acts[None]}
        out = sweep_outputs(model, texts, labels, vector, swept, layers, batch_tokens=batch_tokens, desc="BBQ systems")
        return {"probs": out.probs, "acts": out.acts}

    result = cached_tensors(cache, key, run)
    frames, reps = [], {}
    for lam, probs, acts in zip(swept, result["probs"], result["acts"]):
        name = system_name(model.name, None if lam is None else vector, lam or 0.0)
        frame = questions[QUESTION].assign(system=name, pred=probs.argmax(-1).numpy(), mass=probs.sum(-1).numpy())
        for i, letter in enumerate(LETTERS):
            frame[f"p_{letter}"] = (probs[:, i] / probs.sum(-1)).numpy()
        frames.append(frame)
        reps |= {f"{name}|{depth:g}": acts[:, j].contiguous() for j, depth in enumerate(depths)}
    return pd.concat(frames, ignore_index=True), reps
