"""Run a decision task on a model: black-box (the metric per prompt variant and group) and white-box (the metric
of the neutral prompts under a steering sweep, and its exact derivative at lambda = 0). Every forward pass is
cached by content, so a re-run or a resumed audit recomputes nothing."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from llmaudit.chapters.decision_tasks.base import Task, TaskItem, answer_ids, metric
from llmaudit.chapters.steering_vectors import SteeringVector
from llmaudit.errors import AuditError
from llmaudit.models import AuditModel
from llmaudit.models.memory import BatchTokens
from llmaudit.models.steer import Shared, steered
from llmaudit.records import case_records, empty_records
from llmaudit.stats import Estimate, bootstrap_mean, case_slopes, group_gap, paired_gaps, pearson, sweep_slope

# The tests `TaskAudit.cases` can write records for.
CASE_KEYS = ("explicit", "implicit", "slope")


@dataclass
class TaskAudit:
    """Black-box and white-box results of one task under one steering vector, and the estimates drawn from them."""

    task: Task
    vector: SteeringVector
    black: dict[str, pd.DataFrame]
    white: pd.DataFrame

    def gap(self, variant: str, n_boot: int, seed: int) -> Estimate | None:
        """Black-box bias: mean metric of group A minus group B (female - male, Black - White), paired by case;
        None for a variant the task does not have."""
        if variant not in self.black:
            return None
        return group_gap(self.black[variant], *self.task.groups, n_boot=n_boot, seed=seed)

    def competence(self, n_boot: int, seed: int) -> Estimate | None:
        """Can the model do the task at all? A score whose chance level is 0, on the explicit prompts' cases (each
        case's metric averaged over its groups): accuracy minus chance where the task has gold answers, else the
        Pearson r of the metric with the case's decisive fact; None where the task has neither."""
        per_case = self.black["explicit"].groupby("case").agg(metric=("metric", "mean"), fact=("fact", "first"))
        if self.task.chance is not None:
            return bootstrap_mean(per_case["metric"].to_numpy() - self.task.chance, n_boot, seed)
        if per_case["fact"].isna().any() or per_case["fact"].nunique() < 2 or len(per_case) < 4:
            return None
        return pearson(per_case["metric"].to_numpy(), per_case["fact"].to_numpy())

    def slope(self, n_boot: int, seed: int) -> Estimate:
        """White-box sensitivity: OLS slope of the metric on lambda over the sweep."""
        return sweep_slope(self.white, n_boot=n_boot, seed=seed)

    def slope_at_zero(self, n_boot: int, seed: int) -> Estimate | None:
        """Exact d metric / d lambda at lambda = 0 (forward-mode derivative), averaged over cases; None where the
        audit did not take it (`TaskRunner.audit(exact=True)`, local models)."""
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

    def group_means(self, variant: str = "explicit") -> pd.DataFrame:
        """Black-box mean metric per group (columns group, mean)."""
        means = self.black[variant].groupby("group")["metric"].mean()
        return pd.DataFrame({"group": means.index, "mean": means.values})

    def mass(self) -> float:
        """Mean probability the model puts on the answer words at all (low: it barely answers)."""
        return float(pd.concat([*self.black.values(), self.white])["mass"].mean())

    def case_gaps(self, variant: str) -> pd.Series:
        """Per case (index), metric(group A) - metric(group B) of a black-box variant, exactly the values whose mean
        `gap` reports (cases lacking one group left out)."""
        return paired_gaps(self.black[variant], *self.task.groups)

    def case_slopes(self) -> pd.Series:
        """Per case (index), the OLS slope of the metric on lambda, exactly the values whose mean `slope` reports."""
        return case_slopes(self.white)

    def cases(self, keys: Mapping[str, str]) -> pd.DataFrame:
        """Case records (report/evidence.py) of the tests named in `keys`: "explicit" / "implicit" (black-box gaps)
        and "slope" (the white-box slope) mapped to their results-file names, e.g. {"explicit":
        "credit.blackbox_explicit", "slope": "credit.whitebox_slope"}. One record per item (per prompt, or per
        prompt and lambda), whose `value` is its case's gap or slope: the test's score is their mean over cases. A
        variant the task lacks gives no records; items of a case outside the score have a null value."""
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
        if "slope" in keys:
            parts.append(case_records(self.white, keys["slope"], self.case_slopes(), lam=self.white["lam"]))
        return pd.concat(parts, ignore_index=True) if parts else empty_records()


@dataclass(frozen=True)
class TaskRunner:
    """Where and how task prompts run: the model, the sampling seed, the batch budget, the data mirror, the
    forward-pass cache (None: no caching), how many lambdas share one pass over the upper blocks, and all the
    audit's steering vectors (whose selection rows are held out of every task)."""

    model: AuditModel
    seed: int
    batch_tokens: BatchTokens
    mirror: Path | None = None
    cache: Path | None = None
    lambda_batch: int = 1
    vectors: tuple[SteeringVector, ...] = ()

    def audit(self, task: Task, vector: SteeringVector, lambdas: Sequence[float], n: int | None,
              projection: bool = True, exact: bool = False) -> TaskAudit:
        """The task black-box (explicit and implicit variants) and white-box (neutral prompts swept along
        `vector`, with the projection edit or the additive one, and with `exact` the derivative at lambda = 0), on
        the same cases whichever vector steers them."""
        exclude = self.held_out(task)
        swept = self._prompts(task.items("neutral", n, self.seed, self.mirror, exclude))
        black = {variant: self.black_box(task, variant, n, exclude, swept) for variant in task.black_box_variants}
        return TaskAudit(task, vector, black, self.white_box(task, vector, lambdas, n, exclude, projection, exact))

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
        (the neutral ones); where this variant holds them all, their lower states are kept for the sweeps."""
        items = task.items(variant, n, self.seed, self.mirror, exclude)
        blocks = sorted({v.layer for v in self.vectors if v.concept == task.concept})
        return self.score(items, task.answers, f"{task.name} {variant}", swept, blocks).assign(
            fact=[task.fact(i) for i in items])

    def score(self, items: Sequence[TaskItem], answers: Sequence[str], desc: str, swept: Sequence[str] = (),
              blocks: Sequence[int] = ()) -> pd.DataFrame:
        """Any task items (e.g. perturbed beyond the task's own variants) scored like `black_box`; where the items'
        prompts hold all the prompts `swept` and the pass runs, those prompts' states at `blocks` are stored for the
        sweeps that steer them (`models.states`)."""
        texts, labels = self._prompts(items), answer_ids(self.model.tokenizer, answers)
        keep = blocks if swept and set(swept) <= set(texts) else ()
        probs = steered(self.model, texts=texts, labels=labels, cache=self.cache, shared=Shared(keep=tuple(keep),
                        of=tuple(swept)), batch_tokens=self.batch_tokens, desc=desc).probs[0]
        return pd.DataFrame(
            {
                "case": [item.case for item in items],
                "group": [item.group for item in items],
                "metric": metric(probs, [item.target for item in items]).numpy(),
                "mass": probs.sum(-1).numpy(),
                "prompt": texts,
            }
        )

    def white_box(
        self, task: Task, vector: SteeringVector, lambdas: Sequence[float], n: int | None,
        exclude: Collection[int] = (), projection: bool = True, exact: bool = False,
    ) -> pd.DataFrame:
        """Per neutral item and lambda: case, lam, metric, mass and the exact prompt text; `projection` False steers
        with the additive edit. With `exact` (local models), also each case's exact derivative at lambda = 0
        (`slope0`): a forward-mode pass through the upper blocks that costs several sweeps' lambdas, so it is taken
        only where it is reported. The probabilities and the derivative are cached apart; a missing one is computed
        alone, in one pass with the other when both are missing."""
        model, items = self.model, task.items("neutral", n, self.seed, self.mirror, exclude)
        texts, labels = self._prompts(items), answer_ids(model.tokenizer, task.answers)
        targets = [item.target for item in items]
        exact = exact and model.hf is not None
        # start from any vector's block (tasks of both concepts share their neutral prompts: admissions); keep the
        # states at the lowest block the concept's vectors steer, where its other vector's sweeps start
        concept = [v.layer for v in self.vectors if v.concept == vector.concept and v.layer <= vector.layer]
        shared = Shared(starts=tuple(v.layer for v in self.vectors), keep=(min([*concept, vector.layer]),))
        swept = steered(model, texts=texts, labels=labels, vector=vector, lambdas=lambdas, projection=projection,
                        targets=targets if exact else None, cache=self.cache, shared=shared,
                        batch_tokens=self.batch_tokens, lambda_batch=self.lambda_batch, desc=f"{task.name} sweep")
        cases = [item.case for item in items]
        frame = pd.concat(
            [
                pd.DataFrame({"case": cases, "lam": lam, "metric": metric(p, targets).numpy(),
                              "mass": p.sum(-1).numpy(), "prompt": texts})
                for lam, p in zip(lambdas, swept.probs)
            ],
            ignore_index=True,
        )
        if swept.derivative is not None:
            frame = frame.merge(pd.DataFrame({"case": cases, "slope0": swept.derivative.numpy()}))
        return frame

    def _prompts(self, items: Sequence[TaskItem]) -> list[str]:
        """Chat-formatted prompts of task items, answer prefix included."""
        return [self.model.chat(item.prompt, item.prefix) for item in items]
