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

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pandas as pd
import torch

from llmaudit.chapters.decision_tasks.base import TaskItem
from llmaudit.chapters.steering_vectors.selection import scale
from llmaudit.chapters.steering_vectors.wmd import wmd
from llmaudit.models.vector import SteeringVector

BAND = (-0.5, 0.5)  # scores below / above are the negative / positive contrast, the rest (score 0) neutral


@dataclass(frozen=True)
class Dependence:
    """One task's dependence measurements: its task-relevant concept, the vector extracted for it, the contrast
    prompts scored (columns case, group, metric, mass, prompt, lam = the concept score) and the white-box prompts
    swept along the vector (as `TaskRunner.white_box` gives them); a model that cannot be steered has the black-box
    measurements alone (`vector`, `white` None)."""

    concept: str
    vector: SteeringVector | None
    black: pd.DataFrame
    white: pd.DataFrame | None


def task_vector(name: str, layer: int, acts: torch.Tensor, scores: torch.Tensor) -> SteeringVector:
    """The weighted-mean-difference vector of contrast activations (n, width) at block `layer` with concept scores
    in [-1, 1], scaled to projection units per unit of score."""
    direction, mean = wmd(acts[:, None], scores, *BAND)
    projected = (acts - mean[0]) @ direction[0]
    return SteeringVector(name, name, layer, direction[0], mean[0], scale(projected, scores),
                          {"dataset": "contrast prompts", "band": list(BAND)})


def measure(name: str, concept: str, layer: int, items: Sequence[TaskItem], scored: pd.DataFrame,
            acts: torch.Tensor, sweep: Callable[[SteeringVector], pd.DataFrame]) -> Dependence:
    """Task `name`'s dependence measurements on its task-relevant `concept`: its contrast `items` as scored (case,
    group, metric, mass, prompt) with their last token's output of block `layer` (`acts`: items, width), where the
    task vector is fitted, and its white-box prompts swept along that vector by `sweep`."""
    scores = torch.tensor([item.meta["score"] for item in items], dtype=torch.float32)
    vector = task_vector(f"{name}_{concept.split()[0]}", layer, acts, scores)
    return Dependence(concept, vector, scored.assign(lam=scores.numpy()), sweep(vector))


def measured(concept: str, items: Sequence[TaskItem], scored: pd.DataFrame) -> Dependence:
    """The black-box dependence measurements alone, of a model that cannot be steered: the contrast `items` as
    scored, each at its concept score."""
    scores = torch.tensor([item.meta["score"] for item in items], dtype=torch.float32)
    return Dependence(concept, None, scored.assign(lam=scores.numpy()), None)
