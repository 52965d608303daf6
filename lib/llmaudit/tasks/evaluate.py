"""Run a decision task on a model: black-box (the metric per prompt variant and group) and white-box (the metric
of the neutral prompts under a steering sweep, and its exact derivative at lambda = 0). Every forward pass is
cached by content, so a re-run or a resumed audit recomputes nothing."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import torch

from llmaudit.cache import cached_tensors, digest
from llmaudit.models import AuditModel
from llmaudit.models.sweep import sensitivity_at_zero, sweep
from llmaudit.stats import Estimate, bootstrap_mean, group_gap, sweep_slope
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


@dataclass
class TaskAudit:
    """Black-box and white-box results of one task under one steering vector, and the estimates drawn from them."""

    task: Task
    vector: SteeringVector
    black: dict[str, pd.DataFrame]
    white: pd.DataFrame

    def gap(self, variant: str, n_boot: int, seed: int) -> Estimate:
        """Black-box bias: mean metric of group A minus group B (female - male, Black - White), paired by case."""
        return group_gap(self.black[variant], *self.task.groups, n_boot=n_boot, seed=seed)

    def slope(self, n_boot: int, seed: int) -> Estimate:
        """White-box sensitivity: OLS slope of the metric on lambda over the sweep."""
        return sweep_slope(self.white, n_boot=n_boot, seed=seed)

    def slope_at_zero(self, n_boot: int, seed: int) -> Estimate | None:
        """Exact d metric / d lambda at lambda = 0 (forward-mode derivative), averaged over cases."""
        if "slope0" not in self.white:
            return None
        per_case = self.white.drop_duplicates("case")["slope0"].to_numpy()
        return bootstrap_mean(per_case, n_boot, seed)

    def curve(self) -> pd.DataFrame:
        """Mean metric per lambda with a normal 95% interval over cases."""
        grouped = self.white.groupby("lam")["metric"]
        mean, half = grouped.mean(), 1.96 * grouped.std() / grouped.count() ** 0.5
        return pd.DataFrame({"lam": mean.index, "mean": mean.values, "lo": (mean - half).values,
                             "hi": (mean + half).values})

    def mass(self) -> float:
        """Mean probability the model puts on the answer words at all (low: it barely answers)."""
        return float(pd.concat([*self.black.values(), self.white])["mass"].mean())


def audit_task(
    model: AuditModel,
    task: Task,
    vector: SteeringVector,
    lambdas: Sequence[float],
    n: int | None,
    seed: int,
    batch_tokens: int,
    mirror: Path | None = None,
    cache: Path | None = None,
) -> TaskAudit:
    """Run a task black-box (explicit and implicit variants) and white-box (neutral prompts swept along `vector`);
    evaluation rows never include the rows that chose and scaled the vector."""
    exclude = set(vector.meta.get("val_ids", [])) if task.concept == "race" else set()
    args = (n, seed, batch_tokens, mirror, cache, exclude)
    black = {variant: black_box(model, task, variant, *args) for variant in ("explicit", "implicit")}
    return TaskAudit(task, vector, black, white_box(model, task, vector, lambdas, *args))
