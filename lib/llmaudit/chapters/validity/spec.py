"""The validity chapter's declaration: its params section and the credit task's test with names as the only
gender signal (main paper §5)."""

from __future__ import annotations

from typing import Any

from pydantic import model_validator

from llmaudit.capabilities import Capability
from llmaudit.chapters.decision_tasks import TASKS
from llmaudit.chapters.decision_tasks.spec import GAP_EPSILON, requirement, tasks_run
from llmaudit.sections import Section
from llmaudit.spec import ChapterSpec, Result, Sign, VerdictTest, result

NAMES_IMPLICIT = result("credit", "names_implicit")  # the credit gap between names with p_f <= 0.1 and >= 0.9


class ValidityParams(Section):
    """Sizes of the validity chapter (main paper §5): SSA names kept (at least `min_births` births), names per p_f
    bin for the projections (None: all), credit profiles given one name per bin (None: the credit task's size), and
    equal-count classes for numeric variables in the Sobol' indices (None: a count that grows with the number of
    cases, `llmaudit.chapters.validity.sobol.class_count`; a fixed count loses effects that vary within a class)."""

    min_births: int = 2500
    names_per_bin: int | None = None
    name_profiles: int | None = None
    sobol_bins: int | None = None

    @model_validator(mode="after")
    def _sizes(self) -> ValidityParams:
        if self.min_births < 1 or (self.sobol_bins is not None and self.sobol_bins < 2) or any(
            n is not None and n < 2 for n in (self.names_per_bin, self.name_profiles)
        ):
            raise ValueError("need min_births >= 1, sobol_bins >= 2 (or omitted), names_per_bin and name_profiles "
                             ">= 2 (or omitted)")
        return self


def _tests(params: Any) -> list[VerdictTest]:
    """The credit task's black-box gap with SSA names as the only gender signal, when the credit task runs."""
    if "credit" not in tasks_run(params):
        return []
    return [VerdictTest(requirement=requirement("credit"), name=NAMES_IMPLICIT,
                        label="black-box gap, SSA names with p_f <= 0.1 vs >= 0.9 (validity)", resampled="profiles",
                        instruments=(("task", "credit"),), metric=TASKS["credit"].metric_name, epsilon=GAP_EPSILON,
                        sign=Sign(quantity=TASKS["credit"].metric_name, plus="female-typed names (p_f >= 0.9)",
                                  minus="male-typed names (p_f <= 0.1)"))]


RESULTS = (
    PROJECTION_R := Result("names.projection_r", "Pearson r",
                           "whether the gender vector orders SSA names by their female share p_f"),
    MIXED_R := Result("names.projection_r_mixed", "Pearson r",
                      "the same among names with 0.1 < p_f < 0.9: does the vector grade gender"),
    NAMES_SLOPE := Result("credit.names_slope", "bad credit rate per p_f",
                          "how the bad credit rate moves as the name grows more female"),
    GAP := Result(NAMES_IMPLICIT, "bad credit rate difference",
                  "names with p_f >= 0.9 minus names with p_f <= 0.1 as the only gender signal"),
    Result("credit.names_not_{a}_{b}", "bad credit rate difference",
           "the same gap between names with p_f <= a and >= b"),
    Result("{task}.sobol_shift.{method}", "Sobol' index difference",
           "the largest change of a variable's first-order index from the no-attribute baseline"),
)

CHAPTER = ChapterSpec(key="validity", title="Validity",
                      computing=("data", "models", "chapters.steering_vectors", "chapters.decision_tasks",
                                 "chapters.validity"),
                      section="validity", params=ValidityParams, reads=("tasks",), reuses=("robustness",),
                      verdict_tests=_tests, results=RESULTS,
                      headlines=(PROJECTION_R.headline("names: projection vs female share"),
                                 MIXED_R.headline("mixed names: projection vs female share"),
                                 GAP.headline("credit: gap between female and male names"),
                                 NAMES_SLOPE.headline("credit: rate per unit female share")),
                      needs=lambda params: (Capability.PROBABILITIES, Capability.STATES, Capability.EDITS))
