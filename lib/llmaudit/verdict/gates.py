"""Instrument gates of the verdict page: before a test's interval is read against epsilon, is the instrument that
measured it working? A steering vector must track and move its concept, a decision task must be done better than chance,
a few-shot sentiment classifier must beat guessing and predict every label its gold answers use. A test whose instrument
fails a gate is "not measurable" (an invariance "pass" of a broken instrument says nothing about the model); a gate
whose number the chapters have not recorded is shown as not checked rather than silently passed, saying why from the
results: the chapter that records it did not run the instrument, or ran it and had nothing to record."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd
from pydantic import model_validator

from llmaudit.markedness import spec as markedness
from llmaudit.markedness.spec import ACCURACY_OVER_CHANCE, MIN_LABEL_SHARE
from llmaudit.sections import Section, within
from llmaudit.spec import result
from llmaudit.steering import CONCEPT_VECTORS
from llmaudit.steering import spec as steering
from llmaudit.steering.spec import CORR, SCORE_SPAN
from llmaudit.tasks import spec as tasks
from llmaudit.tasks.spec import COMPETENCE

CONCEPT = {vector: concept for concept, vectors in CONCEPT_VECTORS.items() for vector in vectors}

PASSED, FAILED, NOT_CHECKED = "passed", "failed", "not checked"


class GateParams(Section):
    """The params file's `gates` section. A steering vector needs the Pearson corr of its projection with the concept
    score and the span of the concept score it steers (lambda +1 minus -1) at least these; a task's competence
    interval (chance level 0) must lie above `task_competence`; a 9-shot sentiment classifier's accuracy must beat
    guessing (1/3) by more than `classifier_accuracy`, and each label its gold answers use must make at least
    `classifier_min_label_share` of its predictions."""

    vector_corr: float = 0.2
    vector_span: float = 0.5
    task_competence: float = 0.0
    classifier_accuracy: float = 0.0
    classifier_min_label_share: float = 0.05

    @model_validator(mode="after")
    def _ranges(self) -> GateParams:
        limits = {"vector_corr": (1, "1"), "vector_span": (2, "2"), "task_competence": (1, "1"),
                  "classifier_accuracy": (1, "1"), "classifier_min_label_share": (1 / 3, "1/3")}
        for key, (top, shown) in limits.items():
            try:
                within(getattr(self, key), 0, top, shown)
            except ValueError as err:
                raise ValueError(f"{key}: {err}") from None
        return self


@dataclass(frozen=True)
class Gate:
    """One check of an instrument: the results-file number '{instrument name}.{name}' (its value, or its interval's
    lower bound) against the GateParams field `threshold`, strictly above it or at least it; `failing` says what a
    failure means ({concept}: a vector's concept). `chapter` records the number; `unrecorded` says why a run of it
    that evaluated the instrument may have recorded none."""

    instrument: str
    name: str
    label: str
    column: str
    threshold: str
    strict: bool
    failing: str
    chapter: str
    unrecorded: str = "its run recorded no such number: rerun the chapter with this version"


GATES: tuple[Gate, ...] = (
    Gate("vector", CORR, "corr", "value", "vector_corr", False,
         "its projection hardly tracks the {concept} score: not a {concept} direction on this model",
         steering.CHAPTER.key),
    Gate("vector", SCORE_SPAN, "steered score span", "value", "vector_span", False,
         "steering along it hardly moves the {concept} score: not a {concept} direction on this model",
         steering.CHAPTER.key),
    Gate("task", COMPETENCE, "competence lower bound", "lo", "task_competence", True,
         "the interval does not exclude chance: the model's decisions carry no task signal to be biased",
         tasks.CHAPTER.key, "the task has no gold answer or decisive fact"),
    Gate("probes", ACCURACY_OVER_CHANCE, "9-shot accuracy over guessing (1/3)", "value",
         "classifier_accuracy", True, "the classifier does no better than guessing among the three labels",
         markedness.CHAPTER.key),
    Gate("probes", MIN_LABEL_SHARE, "smallest predicted-label share", "value", "classifier_min_label_share",
         False, "the classifier (almost) never predicts one label, so its error rates do not compare across groups",
         markedness.CHAPTER.key),
)


@dataclass(frozen=True)
class Check:
    """One gate applied to one instrument (a vector, task or probe set by name); value None: not recorded, and
    `evaluated` says whether the gate's chapter ran the instrument at all. `estimate`: the recorded number as read,
    with its interval where it has one."""

    gate: Gate
    subject: str
    value: float | None
    threshold: float
    evaluated: bool = False
    estimate: str = ""

    @property
    def state(self) -> str:
        """passed, failed or not checked."""
        if self.value is None:
            return NOT_CHECKED
        above = self.value > self.threshold if self.gate.strict else self.value >= self.threshold
        return PASSED if above else FAILED

    def text(self) -> str:
        """How the check reads on the verdict page, e.g. 'gender_id corr 0.016 < 0.2: not a gender direction ...'."""
        head = f"{self.subject} {self.gate.label}"
        if self.state == NOT_CHECKED:
            return f"{head}: not checked ({self._absent()})"
        passed = self.state == PASSED
        line = f"{head} {self.value:.3f} {_RELATION[passed, self.gate.strict]} {self.threshold:g}"
        return line if passed else f"{line}: {self.gate.failing.format(concept=CONCEPT.get(self.subject, ''))}"

    def brief(self) -> str:
        """The check in a few words for the report's first screen, e.g. 'credit competence -0.102 [-0.130, -0.065],
        needs lower bound > 0'; for an unchecked gate, why it is not."""
        quantity = self.gate.label.removesuffix(" lower bound")
        if self.state == NOT_CHECKED:
            return f"{self.subject} {quantity} not checked: {self._absent(named=False)}"
        bound = "lower bound " if self.gate.column == "lo" else ""
        return (f"{self.subject} {quantity} {self.estimate}, needs {bound}"
                f"{_RELATION[True, self.gate.strict]} {self.threshold:g}")

    def _absent(self, named: bool = True) -> str:
        """Why the gate's number is not in the results: the chapter did not evaluate the instrument, or did and had
        nothing to record (with `named`, after the missing number's results-file name)."""
        if not self.evaluated:
            return f"the {self.gate.chapter} chapter has not run {self.subject}"
        return f"no {self.subject}.{self.gate.name}: {self.gate.unrecorded}" if named else self.gate.unrecorded


_RELATION = {(True, True): ">", (True, False): "≥", (False, True): "≤", (False, False): "<"}


def _number(found: pd.DataFrame, key: str, column: str) -> float | None:
    """A recorded number of the results table (indexed by name), or None where it is absent or empty."""
    if key not in found.index or pd.isna(found.at[key, column]):
        return None
    return float(found.at[key, column])


def _estimate(found: pd.DataFrame, key: str) -> str:
    """A recorded number as the first screen shows it: its value, with its interval where it has one."""
    value = _number(found, key, "value")
    if value is None:
        return ""
    lo, hi = _number(found, key, "lo"), _number(found, key, "hi")
    return f"{value:.3f}" if lo is None or hi is None else f"{value:+.3f} [{lo:+.3f}, {hi:+.3f}]"


def _evaluated(found: pd.DataFrame, chapter: str, subject: str) -> bool:
    """Whether the results hold any number the chapter recorded about the instrument (names '{subject}.*')."""
    names = found.index[found["chapter"] == chapter]
    return bool(names.str.startswith(f"{subject}.").any())


def checks(instruments: Sequence[tuple[str, str]], found: pd.DataFrame, params: GateParams) -> list[Check]:
    """Every gate of the (instrument kind, name) pairs a test relies on, read from the results table by name."""
    return [
        Check(gate, subject, _number(found, result(subject, gate.name), gate.column), getattr(params, gate.threshold),
              _evaluated(found, gate.chapter, subject), _estimate(found, result(subject, gate.name)))
        for kind, subject in instruments
        for gate in GATES
        if gate.instrument == kind
    ]


def state(found: Sequence[Check]) -> str:
    """A test's gate state: failed if any gate fails, else not checked if any is, else passed."""
    states = {check.state for check in found}
    return FAILED if FAILED in states else NOT_CHECKED if NOT_CHECKED in states else PASSED
