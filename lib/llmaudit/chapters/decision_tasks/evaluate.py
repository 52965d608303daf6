"""Run a decision task on a model: black-box (the metric per prompt variant and group) and white-box (the metric
of the paper's white-box prompts under a steering sweep, its exact derivatives at lambda = 0, the concept removed
from the prompt, and the dependence tests' measurements). Every forward pass is cached by content, so a re-run or a
resumed audit recomputes nothing."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import torch

from llmaudit.chapters.decision_tasks.base import SampledTask, Task, TaskItem, answer_ids, metric
from llmaudit.chapters.decision_tasks.dependence import Dependence, measure, measured
from llmaudit.chapters.decision_tasks.reading import sampled, scored
from llmaudit.chapters.steering_vectors import SteeringVector
from llmaudit.errors import AuditError
from llmaudit.models import AuditModel
from llmaudit.models.ask import ask
from llmaudit.models.engines import Capability
from llmaudit.models.passes.required import required
from llmaudit.models.request import Edit, Keep, Request
from llmaudit.records import case_records, empty_records
from llmaudit.stats import Estimate, bootstrap_mean, case_slopes, group_gap, paired_gaps, pearson, sweep_slope
from llmaudit.verdict.margins import EpsilonParams

# The tests `TaskAudit.cases` can write records for.
CASE_KEYS = ("explicit", "implicit", "slope", "dependence_black", "dependence_white")


@dataclass
class TaskAudit:
    """Black-box and white-box results of one task under one steering vector, and the estimates drawn from them:
    `white` sweeps the paper's white-box prompts (column group: the implicit signal they keep, '' where none),
    `removed` the prompts with the concept removed (None where they are the white-box prompts), `dependence` the
    task-relevant concept's tests (None where the task has none or they were not run). A model whose engine cannot
    steer (`Engine.steers`: an endpoint) has no vector and no white-box sweep; `min_coverage`: its reads' least."""

    task: Task
    steering: SteeringVector | None
    black: dict[str, pd.DataFrame]
    sweep: pd.DataFrame | None
    removed: pd.DataFrame | None = None
    dependence: Dependence | None = None
    min_coverage: float = 0.0

    @property
    def vector(self) -> SteeringVector:
        """The vector that steered the white-box prompts (a steered audit's)."""
        return required(self.steering, "the steering vector")

    @property
    def white(self) -> pd.DataFrame:
        """The white-box sweep (a steered audit's)."""
        return required(self.sweep, "the white-box sweep")

    def gap(self, variant: str, n_boot: int, seed: int) -> Estimate | None:
        """Black-box bias: mean metric of group A minus group B (female - male, Black - White), paired by case;
        None for a variant the task does not have."""
        if variant not in self.black:
            return None
        return group_gap(self.black[variant], *self.task.groups, n_boot=n_boot, seed=seed)

    def competence(self, n_boot: int, seed: int) -> Estimate | None:
        """Can the model do the task at all? A score whose chance level is 0, on the explicit prompts' cases (each
        case's metric averaged over its groups): accuracy minus chance where the task has gold answers, else the
        Pearson r of the metric with the case's decisive fact; None where it has neither or too few answered cases."""
        per_case = self.black["explicit"].groupby("case").agg(metric=("metric", "mean"), fact=("fact", "first")
                                                               ).dropna(subset=["metric"])  # sampled: none answered
        if self.task.chance is not None:
            scores = per_case["metric"].to_numpy() - self.task.chance
            return bootstrap_mean(scores, n_boot, seed) if len(scores) > 1 else None
        if per_case["fact"].isna().any() or per_case["fact"].nunique() < 2 or len(per_case) < 4:
            return None
        return pearson(per_case["metric"].to_numpy(), per_case["fact"].to_numpy())

    def slope(self, n_boot: int, seed: int, group: str | None = None) -> Estimate:
        """White-box sensitivity: OLS slope of the metric on lambda over the sweep (pooled, or of one `group`'s
        prompts: a dialect, a name group)."""
        frame = self.white if group is None else self.white[self.white["group"] == group]
        return sweep_slope(frame, n_boot=n_boot, seed=seed)

    def removed_slope(self, n_boot: int, seed: int) -> Estimate | None:
        """The sensitivity with the concept removed from the prompt (None where those are the white-box prompts)."""
        return None if self.removed is None else sweep_slope(self.removed, n_boot=n_boot, seed=seed)

    def slope_at_zero(self, n_boot: int, seed: int, column: str = "slope0") -> Estimate | None:
        """An exact derivative at lambda = 0 (forward mode) averaged over each case's prompts, then over cases:
        `slope0` at the projection-edited point along k v, `eq2` (main paper Eq. 2) at the unedited state along the
        unit vector; None where the audit did not take it (`TaskRunner.audit(exact=True)`, local models)."""
        if self.sweep is None or column not in self.sweep:
            return None
        per_case = self.white[self.white["lam"] == self.white["lam"].iloc[0]].groupby("case")[column].mean()
        return bootstrap_mean(per_case.to_numpy(), n_boot, seed)

    def dependence_slopes(self, n_boot: int, seed: int) -> dict[str, Estimate]:
        """The dependence tests' scores: black-box (metric per unit of the concept score, where two cases have a slope)
        and white-box (metric per unit lambda along the task vector, where steered); empty where the task has none."""
        if self.dependence is None:
            return {}
        black, white = self.dependence.black, self.dependence.white
        return ({} if len(case_slopes(black)) < 2 else {"black-box": sweep_slope(black, n_boot=n_boot, seed=seed)}) | (
            {} if white is None else {"white-box": sweep_slope(white, n_boot=n_boot, seed=seed)})

    def curve(self, group: str | None = None) -> pd.DataFrame:
        """Mean metric per lambda with a normal 95% interval over cases (of one `group`'s prompts, if given)."""
        frame = self.white if group is None else self.white[self.white["group"] == group]
        grouped = frame.groupby("lam")["metric"]
        mean, half = grouped.mean(), 1.96 * grouped.std() / grouped.count() ** 0.5
        return pd.DataFrame({"lam": mean.index, "mean": mean.values, "lo": (mean - half).values,
                             "hi": (mean + half).values})

    def group_means(self, variant: str = "explicit") -> pd.DataFrame:
        """Black-box mean metric per group (columns group, mean)."""
        means = self.black[variant].groupby("group")["metric"].mean()
        return pd.DataFrame({"group": means.index, "mean": means.values})

    def mass(self) -> float:
        """Mean probability the model puts on the answer words at all (low: it barely answers)."""
        return float(pd.concat([*self.black.values(), *([] if self.sweep is None else [self.sweep])])["mass"].mean())

    def case_gaps(self, variant: str) -> pd.Series:
        """Per case (index), metric(group A) - metric(group B) of a black-box variant, exactly the values whose mean
        `gap` reports (cases lacking one group left out)."""
        return paired_gaps(self.black[variant], *self.task.groups)

    def case_slopes(self) -> pd.Series:
        """Per case (index), the OLS slope of the metric on lambda, exactly the values whose mean `slope` reports."""
        return case_slopes(self.white)

    def cases(self, keys: Mapping[str, str]) -> pd.DataFrame:
        """Case records (report/evidence.py) of the tests named in `keys`: "explicit" / "implicit" (black-box gaps)
        "slope" (the white-box slope), "dependence_black" / "dependence_white" (the dependence tests' slopes, lam:
        the concept score or lambda) mapped to their results-file names, e.g. {"explicit":
        "credit.blackbox_explicit", "slope": "credit.whitebox_slope"}. One record per item (per prompt, or per
        prompt and lambda), whose `value` is its case's gap or slope: the test's score is their mean over cases. A
        variant or dependence test the task lacks gives no records; items of a case outside the score have a null
        value."""
        unknown = sorted(set(keys) - set(CASE_KEYS))
        if unknown:
            raise AuditError(f"unknown case-record key(s) {unknown}: use {', '.join(CASE_KEYS)}")
        empty = [key for key, name in keys.items() if not isinstance(name, str) or not name]
        if empty:
            raise AuditError(f"case-record key(s) {empty} need the test's results-file name, e.g. "
                             "'credit.whitebox_slope'")
        parts = []
        for variant in ("explicit", "implicit"):
            if variant in keys and variant in self.black:
                frame = self.black[variant]
                parts.append(case_records(frame, keys[variant], self.case_gaps(variant), group=frame["group"]))
        swept = {"slope": self.sweep} | ({} if self.dependence is None else {
            "dependence_black": self.dependence.black, "dependence_white": self.dependence.white})
        for key, frame in swept.items():
            if key in keys and frame is not None:
                parts.append(case_records(frame, keys[key], case_slopes(frame), lam=frame["lam"]))
        return pd.concat(parts, ignore_index=True) if parts else empty_records()


@dataclass(frozen=True)
class TaskRunner:
    """Where task prompts run: the model (with its audit's runtime: cache, batch budget, lambda batch), the sampling
    seed, the data mirror, the audit's steering vectors (their selection rows held out of every task, their blocks
    where lower states are kept for the sweeps) and the gaps' `margin`, which sizes sampled reads (`reading`)."""

    model: AuditModel
    seed: int
    mirror: Path | None = None
    vectors: tuple[SteeringVector, ...] = ()
    margin: float = EpsilonParams().gap

    def audit(self, task: Task, vector: SteeringVector | None, lambdas: Sequence[float], n: int | None,
              projection: bool = True, exact: bool = False, dependence: bool = False) -> TaskAudit:
        """The task black-box (explicit and implicit variants) and white-box (the paper's white-box prompts swept
        along `vector`, with the projection edit or the additive one, and with `exact` the derivatives at lambda =
        0), on the same cases whichever vector steers them; with `dependence`, also the concept removed from the
        prompt and the task-relevant concept's dependence measurements (at `vector`'s block). Without a vector
        (a model whose engine cannot steer, `Engine.steers`), the black-box parts alone."""
        exclude = self.held_out(task)
        swept = self._prompts(task.items("whitebox", n, self.seed, self.mirror, exclude)) if vector else []
        black = {variant: self.black_box(task, variant, n, exclude, swept) for variant in task.black_box_variants}
        if vector is None:
            return TaskAudit(task, None, black, None, None, self.dependence(task, None, lambdas, n, exclude)
                             if dependence else None, self.model.engine.min_coverage)
        white = self.white_box(task, vector, lambdas, n, exclude, projection, exact)
        if not dependence:
            return TaskAudit(task, vector, black, white)
        removed = self.removed(task, vector, lambdas, n, exclude, white)
        return TaskAudit(task, vector, black, white, removed, self.dependence(task, vector.layer, lambdas, n, exclude))

    def dependence(self, task: Task, layer: int | None, lambdas: Sequence[float], n: int | None,
                   exclude: Collection[int]) -> Dependence | None:
        """The task's dependence measurements on the cases its audit draws, its task vector fitted at block `layer`
        (None: the black-box test alone; the result None: the task has no task-relevant concept)."""
        if task.relevant is None or not isinstance(task, SampledTask):
            return None
        items = task.contrasts(n, self.seed, self.mirror, exclude)
        if layer is None:
            return measured(task.relevant, items, self.score(items, task.answers, f"{task.name} contrasts"))
        scored, acts = self.score_states(items, task.answers, f"{task.name} contrasts", layer)
        return measure(task.name, task.relevant, layer, items, scored, acts,
                       lambda vector: self.white_box(task, vector, lambdas, n, exclude))

    def removed(self, task: Task, vector: SteeringVector, lambdas: Sequence[float], n: int | None,
                exclude: Collection[int], white: pd.DataFrame) -> pd.DataFrame | None:
        """The sweep of the prompts with the concept removed: None where they are the white-box prompts (credit,
        medical), the white sweep's rows of them where they are among its prompts (judicial: the white-dialect
        side), else a sweep of their own (admissions: the name withheld)."""
        texts = set(self._prompts(task.items("neutral", n, self.seed, self.mirror, exclude)))
        if texts == set(white["prompt"]):
            return None
        if texts <= set(white["prompt"]):
            return white[white["prompt"].isin(texts)].reset_index(drop=True)
        return self.white_box(task, vector, lambdas, n, exclude, variant="neutral")

    def held_out(self, task: Task) -> set[int]:
        """Row ids of the task's source data that chose or scaled any of the audit's vectors: cases never drawn."""
        return {
            row for vector in self.vectors if task.source and vector.meta.get("dataset") == task.source
            for row in vector.meta.get("val_ids", [])
        }

    def black_box(self, task: Task, variant: str, n: int | None, exclude: Collection[int] = (),
                  swept: Sequence[str] = ()) -> pd.DataFrame:
        """Per item: case, group, metric, the answer words' probability mass (how much the model answers), the exact
        prompt text it read and the case's decisive fact (`Task.fact`). `swept`: the prompts the task's sweeps steer
        (the white-box ones); where this variant holds them all, their lower states are kept for the sweeps."""
        items = task.items(variant, n, self.seed, self.mirror, exclude)
        return self.score(items, task.answers, f"{task.name} {variant}", self._keep(task.concept, swept)).assign(
            fact=[task.fact(i) for i in items])

    def score_states(self, items: Sequence[TaskItem], answers: Sequence[str], desc: str,
                     layer: int) -> tuple[pd.DataFrame, torch.Tensor]:
        """Items scored like `score`, with their last token's output of block `layer` (items, width)."""
        texts, labels = self._prompts(items), answer_ids(self.model.tokenizer, answers)
        out = ask(self.model, Request(texts=texts, labels=labels, layers=(layer,), desc=desc))
        return scored(self.model, items, texts, labels, out.probs[0]), required(out.acts, "block outputs")[0, :, 0]

    def score(self, items: Sequence[TaskItem], answers: Sequence[str], desc: str,
              keep: Keep | None = None) -> pd.DataFrame:
        """Any task items (e.g. perturbed beyond the task's own variants) scored like `black_box`; `keep`: the lower
        states to store for the sweeps that steer some of the prompts (`models.request.Keep`); without probabilities
        from the engine, each item's metric is a share of seeded sampled answers (`reading.sampled`)."""
        texts, labels = self._prompts(items), answer_ids(self.model.tokenizer, answers)
        if not self.model.engine.can(Capability.PROBABILITIES):
            return sampled(self.model, items, texts, answers, desc, self.seed, self.margin)
        probs = ask(self.model, Request(texts=texts, labels=labels, keep=keep, desc=desc)).probs[0]
        return scored(self.model, items, texts, labels, probs)

    def _keep(self, concept: str, swept: Sequence[str] | None = None) -> Keep | None:
        """The lower states of the prompts `swept` (None: the pass's own) worth keeping, at every block the audit's
        vectors of `concept` steer, where their sweeps start; None where there are no such prompts."""
        blocks = sorted({v.layer for v in self.vectors if v.concept == concept})
        return None if swept is not None and not swept else Keep(blocks=blocks, texts=swept)

    def white_box(
        self, task: Task, vector: SteeringVector, lambdas: Sequence[float], n: int | None,
        exclude: Collection[int] = (), projection: bool = True, exact: bool = False, variant: str = "whitebox",
    ) -> pd.DataFrame:
        """Per item of `variant` (the paper's white-box prompts unless told) and lambda: case, group, item (its
        position), lam, metric, mass and the exact prompt text; `projection` False steers with the additive
        edit. With `exact` (where the model's engine takes exact derivatives), also each item's exact
        derivatives at lambda = 0: `slope0` at the edited point along k v (the edit's own), `eq2` at the
        unedited state along the unit vector (main paper Eq. 2, additive edit): forward-mode passes through the
        upper blocks that cost several sweeps' lambdas, so they are taken only where they are reported. The
        probabilities and a derivative are cached apart; a missing one is computed alone, in one pass with the
        other when both are missing."""
        model, items = self.model, task.items(variant, n, self.seed, self.mirror, exclude)
        texts, labels = self._prompts(items), answer_ids(model.tokenizer, task.answers)
        targets = [item.target for item in items]
        exact = exact and model.engine.can(Capability.DERIVATIVE)
        # the sweep starts from the highest block whose states are stored (tasks of both concepts share their neutral
        # prompts: admissions) and keeps them at the lowest block the concept's vectors steer, where its other
        # vector's sweeps start
        keep = self._keep(vector.concept)
        swept = ask(model, Request(texts=texts, labels=labels, edit=Edit(vector=vector, lambdas=lambdas,
                                                                          projection=projection),
                                   targets=targets if exact else None, keep=keep, desc=f"{task.name} sweep"))
        cases, groups = [item.case for item in items], [item.group for item in items]
        frame = pd.concat(
            [
                pd.DataFrame({"case": cases, "group": groups, "item": range(len(items)), "lam": lam,
                              "metric": metric(p, targets).numpy(), "mass": p.sum(-1).numpy(), "prompt": texts})
                for lam, p in zip(lambdas, swept.probs)
            ],
            ignore_index=True,
        )
        if swept.derivative is None:
            return frame
        unedited = ask(model, Request(texts=texts, labels=labels,
                                      edit=Edit(vector=vector, lambdas=(0.0,), projection=False),
                                      targets=targets, keep=keep, desc=f"{task.name} Eq. 2"))
        derivatives = {"slope0": swept.derivative.numpy(), "eq2": required(unedited.derivative, "Eq. 2").numpy()
                       / vector.k}
        return frame.merge(pd.DataFrame({"item": range(len(items)), **derivatives}))

    def _prompts(self, items: Sequence[TaskItem]) -> list[str]:
        """Chat-formatted prompts of task items, answer prefix included."""
        return [self.model.chat(item.prompt, item.prefix) for item in items]
