"""Dependence requirements (main paper §3.4: |S| >= epsilon, "the model output should change predictably" with a
task-relevant concept; §6 leaves the vectors to future work): the positive control of the white-box instrument. A
task's contrast prompts (`SampledTask.contrasts`: its white-box prompts with the task-relevant variable set to each
level, concept score -1 / 0 / +1) give both tests:
- black-box: the OLS slope of the metric on the concept score over each case's levels (does changing GPA in the
  prompt move acceptance?);
- white-box: a steering vector for the concept from the same prompts' activations at the block of the task's main
  vector, by the steering chapter's recipe (weighted mean difference, main paper §3.3; scale k as the steering
  chapter's), swept over the task's white-box prompts: the slope of the metric on lambda.
The direction is fitted to activations and concept scores, never to the model's answers, so it cannot be tuned to
move the metric: a flat sweep means the instrument moves nothing the model reads for this decision."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pandas as pd
import torch

from llmaudit.chapters.decision_tasks.base import SampledTask, Task
from llmaudit.chapters.steering_vectors.selection import scale
from llmaudit.chapters.steering_vectors.wmd import wmd
from llmaudit.models.vector import SteeringVector

if TYPE_CHECKING:
    from llmaudit.chapters.decision_tasks.evaluate import TaskRunner

BAND = (-0.5, 0.5)  # scores below / above are the negative / positive contrast, the rest (score 0) neutral


@dataclass(frozen=True)
class Dependence:
    """One task's dependence measurements: its task-relevant concept, the vector extracted for it, the contrast
    prompts scored (columns case, group, metric, mass, prompt, lam = the concept score) and the white-box prompts
    swept along the vector (as `TaskRunner.white_box` gives them)."""

    concept: str
    vector: SteeringVector
    black: pd.DataFrame
    white: pd.DataFrame


def task_vector(name: str, layer: int, acts: torch.Tensor, scores: torch.Tensor) -> SteeringVector:
    """The weighted-mean-difference vector of contrast activations (n, width) at block `layer` with concept scores
    in [-1, 1], scaled to projection units per unit of score."""
    direction, mean = wmd(acts[:, None], scores, *BAND)
    projected = (acts - mean[0]) @ direction[0]
    return SteeringVector(name, name, layer, direction[0], mean[0], scale(projected, scores),
                          {"dataset": "contrast prompts", "band": list(BAND)})


def measure(runner: TaskRunner, task: Task, layer: int, lambdas: Sequence[float], n: int | None,
            exclude: Collection[int]) -> Dependence | None:
    """The task's dependence measurements on the cases its audit draws (None: the task has no task-relevant
    concept)."""
    if task.relevant is None or not isinstance(task, SampledTask):
        return None
    items = task.contrasts(n, runner.seed, runner.mirror, exclude)
    scored, acts = runner.score_states(items, task.answers, f"{task.name} contrasts", layer)
    scores = torch.tensor([item.meta["score"] for item in items], dtype=torch.float32)
    vector = task_vector(f"{task.name}_{task.relevant.split()[0]}", layer, acts, scores)
    black = scored.assign(lam=scores.numpy())
    return Dependence(task.relevant, vector, black, runner.white_box(task, vector, lambdas, n, exclude))
