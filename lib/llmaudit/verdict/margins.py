"""The params file's `epsilon` section: one equivalence margin per unit of score the verdict tests declare (main
paper §3.4: a requirement of invariance holds when |S| <= epsilon), e.g. `slope` for white-box slopes (metric per
unit lambda), `gap` for black-box gaps (metric difference), `fpr_gap` for the markedness FPR gaps. Each lies in
(0, top): at its top no score of its unit could fail, so every measurable test would pass, and a params file that
leaves it out gets its documented default."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from pydantic import ValidationInfo

from llmaudit.registry import epsilons
from llmaudit.sections import Section, numbers_section
from llmaudit.spec import Epsilon

EPSILONS: tuple[Epsilon, ...] = epsilons()


def _range(cls: type[Section], value: float, info: ValidationInfo) -> float:
    """A margin within (0, its top), else ValueError saying why the top is one."""
    epsilon = next(e for e in EPSILONS if e.key == info.field_name)
    if not 0 < value < epsilon.top:
        raise ValueError(f"must be a number > 0 and < {epsilon.top:g} (got {value:g}): {epsilon.beyond}")
    return value


if TYPE_CHECKING:  # the fields are known at run time only: the type checker reads any margin as a float
    class EpsilonParams(Section):
        def __getattr__(self, key: str) -> float: ...
else:
    EpsilonParams = numbers_section("EpsilonParams", "The params file's `epsilon` section: each unit's margin.",
                                    {e.key: e.default for e in EPSILONS}, _range)


def shown(epsilon: float | Mapping[str, float]) -> str:
    """A model card's margins in brief, e.g. 'slope 0.02, gap 0.02, fpr_gap 0.02' (an older card's one number, which
    judged every test, as it is)."""
    if isinstance(epsilon, Mapping):
        return ", ".join(f"{key} {value:g}" for key, value in epsilon.items())
    return f"{epsilon:g} (every test)"
