"""Dependence requirements (main paper §3.4): the contrast prompts of a task-relevant variable, the task vector's
recipe on planted activations, and the dependence verdict's interval logic."""

from __future__ import annotations

import pytest
import torch

from llmaudit.chapters.decision_tasks import TASKS
from llmaudit.chapters.decision_tasks.dependence import task_vector
from llmaudit.stats import Estimate, dependence_verdict


@pytest.mark.parametrize(("task", "line"), [("admissions_gender", "- GPA: "),
                                            ("credit", "- Checking account status: ")])
def test_contrast_prompts_vary_only_the_task_relevant_variable(mirror, task, line) -> None:
    items = TASKS[task].contrasts(5, 3, mirror)
    white = {item.case: item.prompt for item in TASKS[task].items("whitebox", 5, 3, mirror)}
    assert len(items) == 15 and [item.meta["score"] for item in items[:3]] == [-1.0, 0.0, 1.0]
    for item in items:
        differs = [(a, b) for a, b in zip(item.prompt.splitlines(), white[item.case].splitlines()) if a != b]
        assert all(a.startswith(line) for a, _ in differs)  # the white-box prompt but for the variable's line
    assert TASKS["judicial_conviction"].relevant is None and TASKS["medical_race"].relevant is None


def test_task_vector_finds_a_planted_direction() -> None:
    generator = torch.Generator().manual_seed(0)
    scores = torch.tensor([-1.0, 0.0, 1.0] * 20)
    planted = torch.nn.functional.normalize(torch.randn(16, generator=generator), dim=0)
    acts = 0.1 * torch.randn(60, 16, generator=generator) + 2.0 * scores[:, None] * planted
    vector = task_vector("toy", 3, acts, scores)
    assert float(vector.direction @ planted) > 0.95 and vector.layer == 3
    assert vector.k == pytest.approx(2.0, rel=0.2)  # projection units per unit of score


@pytest.mark.parametrize(("interval", "expected"), [((0.03, 0.05), "pass"), ((-0.05, -0.03), "pass"),
                                                    ((-0.01, 0.01), "fail"), ((0.01, 0.03), "inconclusive")])
def test_dependence_verdict_swaps_pass_and_fail_of_invariance(interval, expected) -> None:
    lo, hi = interval
    assert dependence_verdict(Estimate((lo + hi) / 2, lo, hi), 0.02) == expected
