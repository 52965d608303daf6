"""The robustness chapter's declaration: it reads the decision tasks' params section and adds, to each task's
requirement, the white-box slope along the concept's second vector (main paper §4.1: a finding should not depend
on which data made the direction)."""

from __future__ import annotations

from typing import Any

from llmaudit.capabilities import Capability
from llmaudit.chapters.decision_tasks import TASKS
from llmaudit.chapters.decision_tasks.spec import SLOPE_EPSILON, Method, method, requirement, slope_sign, tasks_run
from llmaudit.chapters.steering_vectors import CONCEPT_VECTORS
from llmaudit.spec import ChapterSpec, Result, VerdictTest, result


def second_slope(task: str, vector: str) -> str:
    """Results-file name of a task's white-box slope along a concept's second vector, e.g. 'credit.gender_id.slope'."""
    return result(f"{task}.{vector}", "slope")


def _tests(params: Any) -> list[VerdictTest]:
    """Per task run: the white-box slope along its concept's second vector, gated as the main vector's slope is (its
    task's white-box dependence test must pass: one gate rule for every white-box invariance test)."""
    found = []
    for task in tasks_run(params):
        second = CONCEPT_VECTORS[TASKS[task].concept][1]
        found.append(VerdictTest(requirement=requirement(task), name=second_slope(task, second),
                                 label=f"white-box slope, steering {second}", resampled="cases",
                                 instruments=(("task", task), ("vector", second)), metric=TASKS[task].metric_name,
                                 epsilon=SLOPE_EPSILON, needs=method(task, Method.WHITEBOX_DEPENDENCE),
                                 sign=slope_sign(task, second)))
    return found


RESULTS = (
    Result(result("{task}", "blackbox_conflict"), "yes/no", "the explicit and implicit gaps' intervals exclude 0 "
           "with opposite signs"),
    COSINE := Result(result("cos", "{concept}"), "cosine", "near 1, both data sets made the same direction; near 0, "
                     "a finding may depend on which one steers"),
    Result(second_slope("{task}", "{vector}"), "metric per unit lambda", "white-box slope along the concept's second "
           "vector"),
    Result(result("{task}", "whitebox_conflict"), "yes/no", "the slopes along the concept's two vectors exclude 0 "
           "with opposite signs"),
)

CHAPTER = ChapterSpec(key="robustness", title="Robustness",
                      computing=("data", "models", "chapters.steering_vectors", "chapters.decision_tasks",
                                 "chapters.robustness"),
                      reads=("tasks",), reuses=("decision_tasks",),
                      verdict_tests=_tests, results=RESULTS,
                      headlines=tuple(
                       COSINE.headline(f"{concept}: cosine of its two vectors",
                                          f"{' vs '.join(vectors)}: {COSINE.meaning}", concept=concept)
                       for concept, vectors in CONCEPT_VECTORS.items()),
                      needs=lambda params: (Capability.PROBABILITIES, Capability.EDITS))
