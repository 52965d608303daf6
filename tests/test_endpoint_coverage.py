"""Top-k mode's coverage threshold: a server's window of log-probabilities that leaves an answer word out bounds the
answer words' mass the read covers (`models.endpoint.modes.read_answers`); the decision tasks' black-box gap whose
prompts' reads cover less than `model.min_coverage` is not measurable, with that reason, and one whose reads all hold
both answer words is estimated. The windows come from a standard-library server scripted to return them."""

from __future__ import annotations

import math
from collections.abc import Callable

import pandas as pd
import pytest

from conftest import build_tokenizer
from llmaudit.chapters.decision_tasks import TASKS
from llmaudit.chapters.decision_tasks.base import TaskItem
from llmaudit.chapters.decision_tasks.estimates import estimates
from llmaudit.chapters.decision_tasks.evaluate import TaskAudit, TaskRunner
from llmaudit.models.endpoint.client import Endpoint
from llmaudit.models.endpoint.model import EndpointModel
from llmaudit.models.endpoint.modes import read_answers
from servers import completion, scripted

PROBE = (200, {}, completion("Paris", {"Paris": -0.1, "Lyon": -3.0}), 0.0)


def test_coverage_bounds_the_mass_an_answer_word_outside_the_window_can_hold():
    window = {"Good": math.log(0.6), "maybe": math.log(0.3), "perhaps": math.log(0.05)}
    read = read_answers(completion("Good", window), ["Good", "Bad"])
    assert read.probs == pytest.approx([0.6, 0.0]) and read.outside == 1
    assert read.coverage == pytest.approx(0.6 / (0.6 + 0.05))  # Bad's probability is below the window's last
    assert read_answers(completion("Good", window), ["Good", "maybe"]).coverage == 1.0


def _window(good: float, bad: float | None) -> dict:
    """A reply whose window holds Good at `good` and Bad at `bad` (None: Bad left out, below 'perhaps' at 0.01)."""
    top = {"Good": math.log(good), "perhaps": math.log(0.01)} | ({} if bad is None else {"Bad": math.log(bad)})
    return completion("Good", top)


def _audit(bad: Callable[[int, str], float | None]) -> tuple[TaskAudit, EndpointModel]:
    """Credit's answers read on four cases' female and male prompts, each prompt's P(Bad) `bad(case, group)`."""
    items = [TaskItem(f"case {case} {group}", "Answer:", group, str(case), 1) for case in range(4)
             for group in ("female", "male")]

    def reply(request: dict) -> dict:
        case, group = request["prompt"].split()[1:3]
        return _window(0.5, bad(int(case), group))

    with scripted([PROBE, (200, {}, reply, 0.0)]) as (url, _):
        model = EndpointModel("m", Endpoint(url=url, model="m", retries=0), build_tokenizer(), window=20,
                              provenance={}, min_coverage=0.995, max_samples=100, chat_template=False)
        frame = TaskRunner(model, 0).score(items, TASKS["credit"].answers, "credit explicit").assign(fact=float("nan"))
    return TaskAudit(TASKS["credit"], None, {"explicit": frame}, None, min_coverage=model.engine.min_coverage), model


def test_a_gap_whose_reads_miss_an_answer_word_is_not_measurable_with_the_reason():
    audit, model = _audit(lambda case, group: None if (case, group) == (2, "male") else 0.4)  # Bad outside once
    assert audit.black["explicit"]["coverage"].round(4).tolist() == [1.0] * 5 + [round(0.5 / 0.51, 4)] + [1.0] * 2
    results = estimates({"credit": audit}, 200, 0).results
    assert pd.isna(results.at["credit.blackbox_explicit", "value"])
    note = results.at["credit.blackbox_explicit", "note"]
    assert note.startswith("not measurable: 1 of 8 prompts' top-k reads cover less than 0.995") and "0.980" in note
    assert "answer words outside the window" in model.engine.reason


def test_a_gap_whose_reads_hold_every_answer_word_is_estimated():
    audit, _ = _audit(lambda case, group: 0.2 if group == "female" else 0.4)  # P(Bad) 0.2/0.7 and 0.4/0.9
    results = estimates({"credit": audit}, 200, 0).results
    assert results.at["credit.blackbox_explicit", "value"] == pytest.approx(0.2 / 0.7 - 0.4 / 0.9, abs=1e-6)
