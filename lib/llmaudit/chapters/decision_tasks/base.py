"""What every decision task provides (main paper §4.2-4.4): prompts in three variants and a metric read from the
next-token probabilities of a few answer words, so that results are deterministic.

Variants: `explicit` states the protected attribute (female / male, Black / White ...), `implicit` signals it
(names, dialect), `whitebox` is the paper's white-box prompt (Table 1: explicit variables set to unknown / neutral,
implicit ones, the judicial utterance and the admissions first name, kept) that steering moves, and `neutral`
removes the concept from the prompt altogether (name withheld, one dialect: a named additional white-box row)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from llmaudit.errors import AuditError

VARIANTS = ("explicit", "implicit", "neutral", "whitebox")


@dataclass(frozen=True)
class TaskItem:
    """One prompt: the user message, the assistant's answer prefix, the protected group it shows ('' when
    neutral), the id of the underlying case (shared by its group variants), and the index of the answer word
    whose normalised probability is the metric."""

    prompt: str
    prefix: str
    group: str
    case: str
    target: int
    meta: dict[str, Any] = field(default_factory=dict)


class Task(ABC):
    """A decision task: answer words, prompt builders per variant, and the metric."""

    name: str
    concept: str
    answers: tuple[str, ...]
    metric_name: str
    groups: tuple[str, str]  # (group A, group B): black-box bias = mean metric(A) - mean metric(B), + = female/Black
    source: str | None = None  # steering data set whose validation rows the cases come from (never evaluated on)
    black_box_variants: tuple[str, ...] = ("explicit", "implicit")  # the perturbations whose prompts differ
    chance: float | None = None  # the metric's chance level where it scores gold answers (accuracy)
    relevant: str | None = None  # the task-relevant concept the decision should depend on (§3.4); None: none defensible
    size: int | None = None  # cases a run draws where the params' tasks.sizes does not name the task (None: all)

    def fact(self, item: TaskItem) -> float:
        """The case's decisive fact, which the answers of a model that can do the task follow (NaN where the task
        has none): the competence check correlates the metric with it."""
        return float("nan")

    @abstractmethod
    def items(
        self, variant: str, n: int | None, seed: int, mirror: Path | None = None, exclude: Collection[int] = ()
    ) -> list[TaskItem]:
        """`n` cases (all when None; sampled without replacement with `seed`, never one whose source row id is in
        `exclude`, e.g. rows that chose or scaled a steering vector) expanded into the variant's prompts."""


@dataclass(frozen=True)
class Version:
    """One prompt a case gives in a variant: the group it shows ('' when neutral), the user message, the assistant's
    answer prefix and what the item keeps about it."""

    group: str
    prompt: str
    prefix: str
    meta: dict[str, Any]


class SampledTask(Task):
    """A task whose prompts are versions of cases drawn from a data file. A task module gives its cases (`rows`), the
    prompts each case gives per variant (`versions`) and the answer the metric scores (`scored`, or `target`); the
    drawing and expanding is here, once."""

    scored: str  # the answer word whose normalised probability is the metric
    unit = "cases"  # what a case is, for errors ('pairs', 'profiles')
    # the contrast levels of `relevant`: (concept score in [-1, 1], the value of the task variable that sets it)
    levels: tuple[tuple[float, Any], ...] = ()

    @abstractmethod
    def rows(self, mirror: Path | None) -> dict[int, Any]:
        """Every case by source row id, in data order, each with what its prompts need."""

    @abstractmethod
    def versions(self, variant: str, case: int, row: Any, seed: int) -> list[Version]:
        """The prompts of one case in `variant`; a signal drawn at random is drawn from (`seed`, `case`)."""

    def target(self, row: Any) -> int:
        """Index of the answer whose normalised probability is a case's metric."""
        return self.answers.index(self.scored)

    def sources(self, case: int, row: Any) -> set[int]:
        """The source row ids a case is made of (an excluded one leaves the case out)."""
        return {case}

    def with_level(self, row: Any, value: Any) -> Any:
        """A case with its task-relevant variable set to `value` (the contrast prompts of the dependence test)."""
        raise AuditError(f"{self.name}: the task has no task-relevant concept to contrast")

    def items(
        self, variant: str, n: int | None, seed: int, mirror: Path | None = None, exclude: Collection[int] = ()
    ) -> list[TaskItem]:
        """`n` cases drawn with `seed` from those with no source row in `exclude`, each expanded into its versions."""
        if variant not in VARIANTS:
            raise AuditError(f"{self.name}: unknown variant '{variant}' (use one of {', '.join(VARIANTS)})")
        rows, drawn = self._drawn(n, seed, mirror, exclude)
        return [TaskItem(version.prompt, version.prefix, version.group, str(case), self.target(rows[case]),
                         version.meta)
                for case in drawn for version in self.versions(variant, case, rows[case], seed)]

    def contrasts(
        self, n: int | None, seed: int, mirror: Path | None = None, exclude: Collection[int] = ()
    ) -> list[TaskItem]:
        """The white-box prompts of the cases `items` draws, once per contrast level of the task-relevant variable
        (`meta["score"]`: the level's concept score), all else as the case has it."""
        rows, drawn = self._drawn(n, seed, mirror, exclude)
        return [TaskItem(version.prompt, version.prefix, version.group, str(case), self.target(rows[case]),
                         {**version.meta, "score": score})
                for case in drawn for score, value in self.levels
                for version in self.versions("whitebox", case, self.with_level(rows[case], value), seed)]

    def _drawn(self, n: int | None, seed: int, mirror: Path | None, exclude: Collection[int]) -> tuple[dict, list]:
        """Every case by id, and the ids of `n` drawn with `seed` from those with no source row in `exclude`."""
        rows, skip = self.rows(mirror), set(exclude)
        pool = [case for case, row in rows.items() if not self.sources(case, row) & skip]
        try:
            drawn = sample_ids(pool, n, seed)
        except AuditError as err:
            raise AuditError(f"{self.name}: {err}; {len(rows) - len(pool)} of {len(rows)} {self.unit} excluded "
                             "(rows that made or checked a steering vector)") from err
        return rows, drawn


def sample_ids(ids: Sequence[int], n: int | None, seed: int) -> list[int]:
    """`n` of `ids` drawn without replacement with `seed` (all when None), returned in their original order."""
    if not ids:
        raise AuditError("no cases left to sample after filtering (held-out and invalid rows): check the data file")
    if n is None:
        return list(ids)
    if not 0 <= n <= len(ids):
        raise AuditError(f"cannot sample n={n} cases: {len(ids)} available (use 0 <= n <= {len(ids)} or None for all)")
    picked = np.random.default_rng(seed).choice(len(ids), size=n, replace=False)
    return [ids[i] for i in sorted(picked)]


def answer_ids(tokenizer, answers: Sequence[str]) -> list[int]:
    """The first token of each answer word as it follows the answer prefix (leading space); the first tokens
    must differ, or the answers cannot be told apart from one next-token distribution."""
    ids = [tokenizer.encode(" " + word, add_special_tokens=False)[0] for word in answers]
    if len(set(ids)) != len(ids):
        raise AuditError(f"answers {list(answers)} share a first token for this tokenizer: choose other answer words")
    return ids


def metric(probs: torch.Tensor, targets: Sequence[int] | torch.Tensor) -> torch.Tensor:
    """Normalised probability of each item's target answer among the answers: p[target] / sum(p)."""
    targets = torch.as_tensor(targets, dtype=torch.long)
    return probs.gather(-1, targets.unsqueeze(-1)).squeeze(-1) / probs.sum(-1)
