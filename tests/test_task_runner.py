"""The task pipeline end to end on the tiny model: prompts -> cached forward passes -> per-item tables ->
estimates, with a toy task whose words the tiny tokenizer knows."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest
import torch

from conftest import lower_positions
from llmaudit.chapters.decision_tasks.base import Task, TaskItem, answer_ids
from llmaudit.chapters.decision_tasks.evaluate import TaskAudit, TaskRunner
from llmaudit.chapters.steering_vectors import SteeringVector
from llmaudit.ledger import Ledger
from llmaudit.models.passes.states import stored_states

JOBS = ["nurse", "doctor", "engineer", "teacher"]


class ToyTask(Task):
    name, concept, answers, metric_name, groups = "toy", "gender", ("good", "bad"), "bad rate", ("female", "male")

    def items(self, variant, n, seed, mirror=None, exclude=()):
        cases = [job for i, job in enumerate(JOBS) if i not in exclude][:n]
        if variant in ("neutral", "whitebox"):
            return [TaskItem(f"the {job} started a new job", "answer :", "", job, 1) for job in cases]
        return [
            TaskItem(f"the {job} started a new job and {pronoun} said", "answer :", group, job, 1)
            for job in cases
            for group, pronoun in (("female", "she"), ("male", "he"))
        ]


def toy_vector(model) -> SteeringVector:
    """A seeded random direction at block 2, centred on the toy prompts' mean activation."""
    texts = [model.chat(f"the {job} started a new job", "answer :") for job in JOBS]
    acts = model.forward(texts, [1], layers=[2]).acts[:, 0]
    generator = torch.Generator().manual_seed(1)
    direction = torch.nn.functional.normalize(torch.randn(model.width, generator=generator), dim=0)
    return SteeringVector("v", "gender", 2, direction, acts.mean(0), k=3.0)


def test_runner_tables_cache_and_estimates(bind, tiny_model, tmp_path) -> None:
    vector = toy_vector(tiny_model)
    runner = TaskRunner(bind(tiny_model, batch_tokens=64, cache=tmp_path), seed=0)
    lambdas = [-1.0, 0.0, 1.0]

    audit = runner.audit(ToyTask(), vector, lambdas, n=4, exact=True)
    explicit = audit.black["explicit"]
    assert sorted(explicit["group"].unique()) == ["female", "male"] and len(explicit) == 8
    assert explicit["metric"].between(0, 1).all() and explicit["mass"].between(0, 1).all()
    white = audit.white
    assert len(white) == 4 * len(lambdas) and set(white["lam"]) == set(lambdas) and "slope0" in white
    gap = audit.gap("explicit", n_boot=200, seed=0)
    by_hand = (explicit[explicit.group == "female"]["metric"].to_numpy()
               - explicit[explicit.group == "male"]["metric"].to_numpy()).mean()
    assert abs(gap.value - by_hand) < 1e-6 and gap.lo <= gap.value <= gap.hi
    assert audit.curve()["lam"].tolist() == lambdas

    cached = len(list(tmp_path.glob("*.safetensors")))
    again = runner.audit(ToyTask(), vector, lambdas, n=4, exact=True)  # every forward pass now comes from the cache
    assert len(list(tmp_path.glob("*.safetensors"))) == cached
    assert again.white["metric"].tolist() == white["metric"].tolist()


def test_the_additive_edit_is_cached_apart_and_equals_the_plain_steered_forward(bind, tiny_model, tmp_path) -> None:
    vector, lambdas = toy_vector(tiny_model), [-1.0, 1.0]
    runner = TaskRunner(bind(tiny_model, batch_tokens=64, cache=tmp_path), seed=0)
    projected = runner.white_box(ToyTask(), vector, lambdas, n=4)
    additive = runner.white_box(ToyTask(), vector, lambdas, n=4, projection=False)
    assert not np.allclose(additive["metric"], projected["metric"])  # a separate cache entry, a different edit
    texts = additive["prompt"].iloc[:4].tolist()
    for lam in lambdas:
        plain = tiny_model.forward(texts, answer_ids(tiny_model.tokenizer, ToyTask.answers),
                                   intervention=vector.intervention(lam, projection=False)).probs
        expected = (plain[:, 1] / plain.sum(-1)).numpy()
        assert additive.loc[additive["lam"] == lam, "metric"].to_numpy() == pytest.approx(expected, abs=1e-5)


def test_a_concept_s_second_vector_sweeps_from_the_states_the_first_kept(bind, tiny_model, tmp_path) -> None:
    """The first sweep keeps its prompts' states at the lowest block the concept's vectors steer (another concept's
    lower block is no place to keep them); a later sweep (a new runner, as in another chapter) along the lower vector
    starts there, with the answers of a sweep from the tokens."""
    high, lambdas = toy_vector(tiny_model), [-1.0, 1.0]
    low = dataclasses.replace(high, name="low", layer=1)
    elsewhere = dataclasses.replace(high, name="race", concept="race", layer=0)
    runner = TaskRunner(bind(tiny_model, batch_tokens=64, cache=tmp_path), seed=0, vectors=(high, low, elsewhere))
    runner.white_box(ToyTask(), high, lambdas, n=4, exact=True)
    texts = [tiny_model.chat(item.prompt, item.prefix) for item in ToyTask().items("neutral", 4, 0)]
    assert stored_states(tmp_path, tiny_model.identity, texts, [0, 1, 2]).block == 1
    tiny_model.ledger = Ledger(tiny_model.n_layers)
    later = TaskRunner(bind(tiny_model, batch_tokens=64, cache=tmp_path), seed=0, vectors=(high, low)).white_box(
        ToyTask(), low, lambdas, n=4, exact=True)
    started, tiny_model.ledger = tiny_model.ledger, Ledger(tiny_model.n_layers)
    uncached = TaskRunner(bind(tiny_model, batch_tokens=64), seed=0)
    plain = uncached.white_box(ToyTask(), low, lambdas, n=4, exact=True)
    padded = lower_positions(tiny_model, texts, 64)
    # blocks 0-1 run again by neither the sweep nor the Eq. 2 pass (the derivative at the unedited state)
    assert tiny_model.ledger.actual - started.actual == 2 * padded * (low.layer + 1)
    assert later["metric"].to_numpy() == pytest.approx(plain["metric"].to_numpy(), abs=1e-6)
    assert later["slope0"].to_numpy() == pytest.approx(plain["slope0"].to_numpy(), abs=1e-6)


def test_the_derivative_is_taken_only_when_asked_and_cached_apart_from_the_sweep(bind, tiny_model, tmp_path) -> None:
    vector, lambdas = toy_vector(tiny_model), [-1.0, 0.0, 1.0]
    runner = TaskRunner(bind(tiny_model, batch_tokens=64, cache=tmp_path), seed=0)
    tiny_model.ledger = Ledger(tiny_model.n_layers)
    swept = runner.white_box(ToyTask(), vector, lambdas, n=4)
    assert "slope0" not in swept
    sweep_only = tiny_model.ledger.actual
    exact = runner.white_box(ToyTask(), vector, lambdas, n=4, exact=True)  # the sweep cached: the derivative alone
    derivative_only = tiny_model.ledger.actual - sweep_only
    assert 0 < derivative_only < sweep_only
    assert exact["metric"].tolist() == swept["metric"].tolist()
    plain = TaskRunner(bind(tiny_model, batch_tokens=64), seed=0).white_box(ToyTask(), vector, lambdas, n=4, exact=True)
    assert exact["slope0"].to_numpy() == pytest.approx(plain["slope0"].to_numpy(), abs=1e-6)
    assert not np.allclose(exact["slope0"], 0)
    before = tiny_model.ledger.actual
    bind(tiny_model, batch_tokens=64, cache=tmp_path)  # the cache bound again
    runner.white_box(ToyTask(), vector, lambdas, n=4, exact=True)  # both cached
    assert tiny_model.ledger.actual == before


class Restated(ToyTask):
    """A task whose implicit variant holds its white-box prompts, as the judicial tasks' does."""

    black_box_variants = ("implicit",)

    def items(self, variant, n, seed, mirror=None, exclude=()):
        neutral = super().items("neutral", n, seed, mirror, exclude)
        if variant in ("neutral", "whitebox"):
            return neutral
        male = [item for item in super().items("explicit", n, seed, mirror, exclude) if item.group == "male"]
        return [dataclasses.replace(item, group="female") for item in neutral] + male


def test_a_black_box_pass_holding_the_swept_prompts_keeps_their_states_for_the_sweep(
        bind, tiny_model, tmp_path) -> None:
    vector, lambdas = toy_vector(tiny_model), [-1.0, 1.0]
    low = dataclasses.replace(vector, name="low", layer=1)
    tiny_model.ledger = Ledger(tiny_model.n_layers)
    audit = TaskRunner(bind(tiny_model, batch_tokens=64, cache=tmp_path), seed=0, vectors=(vector, low)).audit(
        Restated(), vector, lambdas, n=4, exact=True)
    sweep = tiny_model.ledger.calls["sweep: toy sweep"]
    tiny_model.ledger = Ledger(tiny_model.n_layers)
    uncached = TaskRunner(bind(tiny_model, batch_tokens=64), seed=0)
    plain = uncached.audit(Restated(), vector, lambdas, n=4, exact=True)
    from_tokens = tiny_model.ledger.calls["sweep: toy sweep"]
    texts = [tiny_model.chat(item.prompt, item.prefix) for item in Restated().items("neutral", 4, 0)]
    padded = lower_positions(tiny_model, texts, 64)
    assert from_tokens[0] - sweep[0] == padded * (vector.layer + 1)  # the sweep ran no block below the edit
    assert sweep[1] == from_tokens[1]  # in both, the black-box pass had run the blocks below: none are needed
    assert audit.white["metric"].to_numpy() == pytest.approx(plain.white["metric"].to_numpy(), abs=1e-6)
    assert audit.white["slope0"].to_numpy() == pytest.approx(plain.white["slope0"].to_numpy(), rel=1e-5)  # float32


def test_held_out_rows_come_from_vectors_of_the_task_source(tiny_model) -> None:
    def vector(dataset: str, ids: list[int]) -> SteeringVector:
        return SteeringVector("v", "race", 0, torch.ones(2), torch.zeros(2), 1.0, {"dataset": dataset, "val_ids": ids})

    class Sourced(ToyTask):
        source = "dialect"

    runner = TaskRunner(tiny_model, 0, vectors=(vector("dialect", [1, 2]), vector("racial_identity", [3])))
    assert runner.held_out(Sourced()) == {1, 2}
    assert runner.held_out(ToyTask()) == set()


def _audit_of(task: Task, metric: list[float], fact: list[float]) -> TaskAudit:
    """A TaskAudit whose explicit black-box table holds two groups per case with the given per-case metric."""
    rows = [{"case": str(i), "group": g, "metric": m + d, "mass": 1.0, "fact": f}
            for i, (m, f) in enumerate(zip(metric, fact)) for g, d in (("female", 0.01), ("male", -0.01))]
    return TaskAudit(task, None, {"explicit": pd.DataFrame(rows)}, pd.DataFrame())


def test_competence_follows_the_decisive_fact_or_the_gold_answers() -> None:
    rng = np.random.default_rng(0)
    fact = rng.uniform(size=40)
    following = _audit_of(ToyTask(), list(0.2 + 0.5 * fact + 0.05 * rng.normal(size=40)), list(fact))
    est = following.competence(500, 0)
    per_case = following.black["explicit"].groupby("case").agg(metric=("metric", "mean"), fact=("fact", "first"))
    assert est.lo > 0.8 and est.value == pytest.approx(np.corrcoef(per_case["metric"], per_case["fact"])[0, 1])
    ignoring = _audit_of(ToyTask(), list(rng.uniform(size=40)), list(fact))
    assert ignoring.competence(500, 0).lo < 0 < ignoring.competence(500, 0).hi  # a model at chance

    class Exam(ToyTask):
        chance = 0.25

    guessing = _audit_of(Exam(), [0.15] * 20 + [0.35] * 20, [float("nan")] * 40)
    knowing = _audit_of(Exam(), [0.6] * 40, [float("nan")] * 40)
    assert guessing.competence(500, 0).lo < 0 < guessing.competence(500, 0).hi
    assert knowing.competence(500, 0).value == pytest.approx(0.35)
    assert _audit_of(ToyTask(), [0.5] * 8, [float("nan")] * 8).competence(500, 0) is None  # no fact, no gold


def test_tasks_without_an_implicit_variant_report_no_implicit_gap(bind, tiny_model, tmp_path) -> None:
    class Stated(ToyTask):
        black_box_variants = ("explicit",)

    audit = TaskRunner(bind(tiny_model, batch_tokens=64, cache=tmp_path), seed=0).audit(
        Stated(), toy_vector(tiny_model), [-1.0, 0.0, 1.0], n=2)
    assert set(audit.black) == {"explicit"} and audit.gap("implicit", 200, 0) is None
    assert audit.black["explicit"]["fact"].isna().all()


class Spoken(ToyTask):
    """A task whose white-box prompts keep an implicit signal in two groups and whose concept-removed prompts are one
    group's, as the judicial tasks' (both speakers' texts; the WME text alone)."""

    def items(self, variant, n, seed, mirror=None, exclude=()):
        both = [dataclasses.replace(item, group={"female": "black", "male": "white"}[item.group])
                for item in super().items("explicit", n, seed, mirror, exclude)]
        return [item for item in both if item.group == "white"] if variant == "neutral" else both


def test_white_box_sweeps_every_group_and_takes_the_removed_row_from_it(bind, tiny_model, tmp_path) -> None:
    vector, lambdas = toy_vector(tiny_model), [-1.0, 0.0, 1.0]
    runner = TaskRunner(bind(tiny_model, batch_tokens=64, cache=tmp_path), seed=0)
    audit = runner.audit(Spoken(), vector, lambdas, n=4, exact=True, dependence=True)
    assert set(audit.white["group"]) == {"black", "white"} and len(audit.white) == 8 * len(lambdas)
    assert audit.removed is not None and set(audit.removed["group"]) == {"white"}
    white_side = audit.white[audit.white["group"] == "white"]
    assert audit.removed["metric"].tolist() == white_side["metric"].tolist()  # the same rows: no sweep of its own
    assert audit.removed_slope(200, 0).value == pytest.approx(audit.slope(200, 0, "white").value)
    sides = [audit.slope(200, 0, group).value for group in ("black", "white")]
    assert audit.slope(200, 0).value == pytest.approx(sum(sides) / 2)  # pooled over both speakers' prompts
    # Eq. 2: the derivative at the unedited state along the unit vector, k times smaller than the additive edit's
    additive = runner.white_box(Spoken(), vector, [0.0], n=4, projection=False, exact=True)
    at_zero = audit.white.loc[audit.white["lam"] == 0, "eq2"].to_numpy()
    assert at_zero == pytest.approx(additive["slope0"].to_numpy() / vector.k, rel=1e-4)
    assert audit.dependence is None and audit.dependence_slopes(200, 0) == {}  # no task-relevant concept
    plain = runner.audit(ToyTask(), vector, lambdas, n=4, dependence=True)
    assert plain.removed is None  # the concept-removed prompts are the white-box ones
