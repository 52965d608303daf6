"""Instrument gates of the verdict page: before a test's interval is read against epsilon, is the instrument that
measured it working? A steering vector must track and move its concept, a decision task must be done better than chance,
a few-shot sentiment classifier must beat guessing and predict every label its gold answers use. A test whose instrument
fails a gate is "not measurable" (an invariance "pass" of a broken instrument says nothing about the model); a gate
whose number the chapters have not recorded is shown as not checked rather than silently passed, saying why from the
results: the chapter that records it did not run the instrument, or ran it and had nothing to record."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING

import pandas as pd
from pydantic import ValidationInfo

from llmaudit.formats import estimate, number, signed
from llmaudit.registry import gates
from llmaudit.sections import Section, numbers_section, within
from llmaudit.spec import Gate, result

PASSED, FAILED, NOT_CHECKED = "passed", "failed", "not checked"
GATES: tuple[Gate, ...] = gates()


def _range(cls: type[Section], value: float, info: ValidationInfo) -> float:
    """A threshold within [0, its gate's top)."""
    top = next(gate.top for gate in GATES if gate.threshold == info.field_name)
    return within(value, 0, top, str(Fraction(top).limit_denominator(10)))


# The params file's `gates` section: one threshold per gate the chapters declare (`ChapterSpec.gates`), e.g. a
# steering vector's `vector_corr` (its projection's Pearson corr with the concept score must be at least it).
if TYPE_CHECKING:  # the fields are known at run time only: the type checker reads any threshold as a float
    class GateParams(Section):
        def __getattr__(self, threshold: str) -> float: ...
else:
    GateParams = numbers_section("GateParams", "The params file's `gates` section: each chapter gate's threshold.",
                                 {gate.threshold: gate.default for gate in GATES}, _range)


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
        shown = signed(self.value) if self.gate.column == "lo" else number(self.value)  # as the headline table has it
        line = f"{head} {shown} {_RELATION[passed, self.gate.strict]} {self.threshold:g}"
        return line if passed else f"{line}: {self.gate.failure(self.subject)}"

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
    return number(value) if lo is None or hi is None else estimate(value, lo, hi)


def _evaluated(found: pd.DataFrame, chapter: str, subject: str) -> bool:
    """Whether the results hold any number the chapter recorded about the instrument (names '{subject}.*')."""
    names = found.index[found["chapter"] == chapter]
    return bool(names.str.startswith(f"{subject}.").any())


def checks(instruments: Sequence[tuple[str, str]], found: pd.DataFrame, params: Section) -> list[Check]:
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
