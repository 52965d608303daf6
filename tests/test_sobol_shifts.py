"""The validity chapter's Sobol' comparison (main paper §5.2, Table 7): the baseline is the prompts with no protected
attribute, scored on their own, never the white-box sweep's lambda = 0 (a named prompt for admissions)."""

from __future__ import annotations

import pandas as pd
import pytest

from llmaudit.chapters.decision_tasks.base import Task, TaskItem
from llmaudit.chapters.decision_tasks.evaluate import TaskAudit, TaskRunner
from llmaudit.chapters.validity.audits import answered, steered
from llmaudit.chapters.validity.shifts import (
    BASELINE,
    answered_frames,
    method_indices,
    no_attribute,
    shifts,
    steered_frames,
)
from test_task_runner import toy_vector

JOBS = ["nurse", "doctor", "engineer", "teacher"]


class NamedTask(Task):
    """Admissions in miniature: the white-box prompt keeps a name-like signal, the neutral one has none."""

    name, concept, answers, metric_name, groups = "named", "gender", ("good", "bad"), "bad rate", ("female", "male")

    def items(self, variant, n, seed, mirror=None, exclude=()):
        cases = JOBS[:n]
        if variant == "neutral":
            return [TaskItem(f"the {job} started a new job", "answer :", "", job, 1, {"job": job}) for job in cases]
        if variant == "whitebox":
            return [TaskItem(f"the {job} started a new job and she said", "answer :", "female", job, 1, {"job": job})
                    for job in cases]
        return [TaskItem(f"the {job} started a new job and {p} said", "answer :", g, job, 1, {"job": job})
                for job in cases for g, p in (("female", "she"), ("male", "he"))]


def test_the_baseline_is_the_prompts_with_no_attribute_not_the_unsteered_sweep(bind, tiny_model, tmp_path) -> None:
    runner = TaskRunner(bind(tiny_model, batch_tokens=64, cache=tmp_path), seed=0)
    task, lambdas = NamedTask(), [0.0, 1.0]
    audit = runner.audit(task, toy_vector(tiny_model), lambdas, n=4)
    baseline = no_attribute(runner, task, 4)
    assert baseline["prompt"].tolist() == [tiny_model.chat(i.prompt, i.prefix) for i in task.items("neutral", 4, 0)]
    by_hand = runner.score(task.items("neutral", 4, 0), task.answers, "by hand")["metric"]
    assert baseline["metric"].tolist() == pytest.approx(by_hand.tolist())
    unsteered = audit.white[audit.white["lam"] == 0]
    assert not set(baseline["prompt"]) & set(unsteered["prompt"])  # the old baseline: a named prompt
    frame, over = answered_frames(audit, baseline)[BASELINE]
    assert frame is baseline and over is None


def test_the_shift_is_measured_from_the_baseline_given() -> None:
    # four cases, x = a a b b. Baseline y = 0 0 1 1: eta^2 = 1, so Sob_x = 1. The sweep at lambda 0 reads y = 0 1 0 1
    # (Sob_x = 0: eta^2 = 0) and at lambda 1 reads 0 0 1 1 (Sob_x = 1): mean over lambda 0.5, a shift of 0.5 - 1 =
    # -0.5 from the baseline. Taking lambda = 0 as the baseline would give +0.5.
    cases = pd.DataFrame({"case": list("pqrs"), "x": list("aabb")})
    baseline = pd.DataFrame({"case": list("pqrs"), "metric": [0.0, 0.0, 1.0, 1.0]})
    white = pd.DataFrame({"case": list("pqrs") * 2, "lam": [0.0] * 4 + [1.0] * 4,
                          "metric": [0.0, 1.0, 0.0, 1.0, 0.0, 0.0, 1.0, 1.0]})
    black = {variant: baseline.assign(group="") for variant in ("explicit", "implicit")}
    audit = TaskAudit(NamedTask(), None, black, white)
    frames = answered_frames(audit, baseline) | steered_frames({"v": audit}, [0.0, 1.0])
    indices = method_indices(frames, cases, ["x"], "named", bins=None, n_boot=20, seed=0)
    found = shifts(indices).results
    assert found.loc["named.sobol_shift.white-box_main_vector", "value"] == pytest.approx(-0.5)
    assert found.loc["named.sobol_shift.black-box_explicit", "value"] == pytest.approx(0.0)


def test_the_sweep_beside_the_unsteered_answers_is_the_audit_and_asks_them_once(bind, tiny_model) -> None:
    # no cache: whatever is asked twice runs twice, so the ledger shows it
    task, lambdas, vector = NamedTask(), [0.0, 1.0], toy_vector(tiny_model)
    model = bind(tiny_model, batch_tokens=64)
    runner = TaskRunner(model, seed=0)
    whole = runner.audit(task, vector, lambdas, n=4)
    black = answered(runner, task, 4)
    assert black.sweep is None and black.steering is None
    before = model.ledger.actual
    audit = steered(runner, black, vector, lambdas, 4)
    ran = model.ledger.actual - before
    runner.white_box(task, vector, lambdas, 4)
    assert ran > 0 and model.ledger.actual - before == 2 * ran  # the sweep alone: no answer asked again
    assert audit.black is black.black and audit.vector is vector
    pd.testing.assert_frame_equal(audit.white, whole.white)
    for variant, frame in whole.black.items():
        pd.testing.assert_frame_equal(audit.black[variant], frame)
