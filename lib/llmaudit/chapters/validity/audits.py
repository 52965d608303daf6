"""The validity chapter's task audits in two parts, so that a model behind an endpoint (no weights) still gets its
black-box tests: the black-box answers asked once, unsteered (`answered`), and the white-box sweeps beside those same
answers (`steered`), which reuse them rather than asking the model again."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from llmaudit.chapters.decision_tasks.base import Task
from llmaudit.chapters.decision_tasks.evaluate import TaskAudit, TaskRunner
from llmaudit.chapters.steering_vectors import SteeringVector


def answered(runner: TaskRunner, task: Task, n: int | None) -> TaskAudit:
    """The task's black-box variants on its `n` cases (None: all), unsteered: no block outputs, no steering."""
    return runner.audit(task, None, (), n)


def steered(runner: TaskRunner, black: TaskAudit, vector: SteeringVector, lambdas: Sequence[float], n: int | None
            ) -> TaskAudit:
    """`black`'s audit with the white-box sweep along `vector` at `lambdas` on the same `n` cases: the black-box
    answers are `black`'s, not asked again."""
    sweep = runner.white_box(black.task, vector, lambdas, n, runner.held_out(black.task))
    return replace(black, steering=vector, sweep=sweep)
