"""Run a decision task on a model: black-box (the metric per prompt variant and group) and white-box (the metric
of the neutral prompts under a steering sweep, and its exact derivative at lambda = 0). Every forward pass is
cached by content, so a re-run or a resumed audit recomputes nothing."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from pathlib import Path

import pandas as pd
import torch

from llmaudit.cache import cached_tensors, digest
from llmaudit.models import AuditModel
from llmaudit.models.sweep import sensitivity_at_zero, sweep
from llmaudit.steering import SteeringVector
from llmaudit.tasks.base import Task, TaskItem, answer_ids, metric


def prompts(model: AuditModel, items: Sequence[TaskItem]) -> list[str]:
    """Chat-formatted prompts of task items, answer prefix included."""
    return [model.chat(item.prompt, item.prefix) for item in items]


def black_box(
    model: AuditModel,
    task: Task,
    variant: str,
    n: int | None,
    seed: int,
    batch_tokens: int,
    mirror: Path | None = None,
    cache: Path | None = None,
    exclude: Collection[int] = (),
) -> pd.DataFrame:
    """Per item: case, group, metric, and the answer words' probability mass (how much the model answers at all)."""
    items = task.items(variant, n, seed, mirror, exclude)
    texts, labels = prompts(model, items), answer_ids(model.tokenizer, task.answers)
    key = {"model": model.identity, "prompts": texts, "labels": labels}
    probs = cached_tensors(cache, key, lambda: {"probs": model.forward(texts, labels, batch_tokens=batch_tokens,
                                                                       desc=f"{task.name} {variant}").probs})["probs"]
    return pd.DataFrame(
        {
            "case": [item.case for item in items],
            "group": [item.group for item in items],
            "metric": metric(probs, [item.target for item in items]).numpy(),
            "mass": probs.sum(-1).numpy(),
        }
    )


def white_box(
    model: AuditModel,
    task: Task,
    vector: SteeringVector,
    lambdas: Sequence[float],
    n: int | None,
    seed: int,
    batch_tokens: int,
    mirror: Path | None = None,
    cache: Path | None = None,
    exclude: Collection[int] = (),
) -> pd.DataFrame:
    """Per neutral item and lambda: case, lam, metric, mass, plus the exact derivative at lambda = 0 (`slope0`)."""
    items = task.items("neutral", n, seed, mirror, exclude)
    texts, labels = prompts(model, items), answer_ids(model.tokenizer, task.answers)
    targets = [item.target for item in items]
    key = {"model": model.identity, "prompts": texts, "labels": labels, "lambdas": list(lambdas),
           "vector": [vector.layer, vector.k, digest(vector.direction.tolist()), digest(vector.mean.tolist())]}

    def run() -> dict[str, torch.Tensor]:
        probs = sweep(model, texts, labels, vector, lambdas, batch_tokens=batch_tokens, desc=f"{task.name} sweep")
        if model.hf is None:
            return {"probs": probs}
        return {"probs": probs, "slope0": sensitivity_at_zero(model, texts, labels, targets, vector,
                                                              batch_tokens=batch_tokens)}

    result = cached_tensors(cache, key, run)
    probs = result["probs"]
    frames = [
        pd.DataFrame({"case": [item.case for item in items], "lam": lam,
                      "metric": metric(probs[i], targets).numpy(), "mass": probs[i].sum(-1).numpy()})
        for i, lam in enumerate(lambdas)
    ]
    frame = pd.concat(frames, ignore_index=True)
    if "slope0" in result:
        frame = frame.merge(pd.DataFrame({"case": [item.case for item in items], "slope0": result["slope0"].numpy()}))
    return frame
