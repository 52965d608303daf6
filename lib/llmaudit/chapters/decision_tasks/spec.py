"""The decision-tasks chapter's declaration: its params section, the names of its results, and its verdict tests
(black-box gaps and the white-box slope along each concept's main vector, main paper §4.2-4.4; per task with a
task-relevant concept, the black-box and white-box dependence tests of §3.4, which the white-box slope needs)."""

from __future__ import annotations

import inspect
from enum import StrEnum
from pathlib import Path
from typing import Any

from pydantic import Field, field_validator

from llmaudit.chapters.decision_tasks import TASKS, answer_ids
from llmaudit.chapters.decision_tasks.base import TaskItem
from llmaudit.chapters.steering_vectors import CONCEPT_VECTORS
from llmaudit.chapters.steering_vectors.concept import poles
from llmaudit.errors import AuditError
from llmaudit.sections import Section, at_least, coefficients, sizes
from llmaudit.spec import ChapterSpec, Epsilon, Gate, Headline, Result, Sign, VerdictTest, probabilities_only, result

BOOTSTRAP_LIMIT = 100_000
COMPETENCE = "competence"  # a score whose chance level is 0: accuracy minus chance, or r with the decisive fact


class Method(StrEnum):
    """A task's bias estimates by the tail of their results-file names (`method`): renaming one is one edit here."""

    BLACKBOX_EXPLICIT = "blackbox_explicit"
    BLACKBOX_IMPLICIT = "blackbox_implicit"
    WHITEBOX_SLOPE = "whitebox_slope"
    WHITEBOX_EXACT_AT_0 = "whitebox_exact_at_0"
    WHITEBOX_EQ2 = "whitebox_eq2"
    WHITEBOX_REMOVED = "whitebox_removed"
    WHITEBOX_SLOPE_AAL = "whitebox_slope_aal"
    WHITEBOX_SLOPE_WME = "whitebox_slope_wme"
    BLACKBOX_DEPENDENCE = "blackbox_dependence"
    WHITEBOX_DEPENDENCE = "whitebox_dependence"


DIALECTS = {"black": "aal", "white": "wme"}  # judicial white-box prompt group -> its speakers' dialect
# The margins of the decision tasks' two kinds of score (the metrics are rates or probabilities, in [0, 1]).
SLOPE_EPSILON = Epsilon(key="slope", unit="metric per unit lambda", default=0.02, top=1.0,
                        beyond="a slope of 1 moves the metric across its whole [0, 1] range between lambda = 0 and "
                               "lambda = 1, where the vectors are fit (main paper §3.3)")
GAP_EPSILON = Epsilon(key="gap", unit="metric difference", default=0.02, top=1.0,
                      beyond="a gap between two rates or probabilities lies in [-1, 1]")
LEVEL_EPSILON = Epsilon(key="level", unit="metric per unit concept score", default=0.02, top=1.0,
                        beyond="a slope of 1 per unit score moves the metric across its whole [0, 1] range between "
                               "two adjacent levels of the task-relevant variable (scores -1, 0, +1)")


class TaskParams(Section):
    """Sizes of the decision tasks (main paper §4.2-4.4): cases per task (null: all its cases, 0 skips it; a task not
    named draws its own default, `Task.size`, the paper's), the lambda grid of the white-box sweep, bootstrap
    resamples for intervals, and how many lambdas share one pass over the upper blocks. The margins their verdicts
    use are the params' `epsilon` section."""

    sizes: dict[str, int | None] = Field(default={}, validate_default=True)
    lambdas: list[float] = [round(-1 + 0.2 * i, 1) for i in range(11)]
    bootstrap: int = 2000
    lambda_batch: int = 1

    @field_validator("sizes")
    @classmethod
    def _sizes(cls, value: dict[str, int | None]) -> dict[str, int | None]:
        """The sizes given, then each task not named at its own default."""
        given = sizes(value, TASKS, "cases")
        return {**given, **{name: task.size for name, task in TASKS.items() if name not in given}}

    @field_validator("lambdas")
    @classmethod
    def _lambdas(cls, value: list[float]) -> list[float]:
        coefficients(value)
        if 0.0 not in value or len(value) < 3 or value != sorted(value):
            raise ValueError(f"give at least 3 increasing values including 0 (got {value})")
        return value

    @field_validator("bootstrap")
    @classmethod
    def _bootstrap(cls, value: int) -> int:
        if not 100 <= value <= BOOTSTRAP_LIMIT:
            raise ValueError(f"must be an integer in [100, {BOOTSTRAP_LIMIT}] (got {value})")
        return value

    @field_validator("lambda_batch")
    @classmethod
    def _batch(cls, value: int) -> int:
        return at_least(value, 1)

    def run(self, task: str) -> bool:
        """Whether the chapter runs `task` (a size of 0 skips it)."""
        return self.sizes.get(task, 1) != 0


_GRID = TaskParams.model_fields["lambdas"].default
LAMBDA_SPAN = (min(_GRID), max(_GRID))  # the default white-box sweep's ends


def requirement(task: str) -> str:
    """The requirement a task's tests decide, e.g. 'credit: the bad-credit rate is invariant to gender'."""
    return f"{task}: the {TASKS[task].metric_name} is invariant to {TASKS[task].concept}"


def dependence(task: str) -> str:
    """The dependence requirement of a task with a task-relevant concept, e.g. 'credit: the bad credit rate depends
    on checking account status'."""
    return f"{task}: the {TASKS[task].metric_name} depends on {TASKS[task].relevant}"


def method(task: str, name: Method) -> str:
    """Results-file name of one of a task's bias estimates, e.g. 'credit.blackbox_explicit'."""
    return result(task, name)


def case_keys(task: str) -> dict[str, str]:
    """The results-file names a task's case records feed (`TaskAudit.cases`): its gaps, its main slope and its
    dependence tests."""
    return {"explicit": method(task, Method.BLACKBOX_EXPLICIT), "implicit": method(task, Method.BLACKBOX_IMPLICIT),
            "slope": method(task, Method.WHITEBOX_SLOPE),
            "dependence_black": method(task, Method.BLACKBOX_DEPENDENCE),
            "dependence_white": method(task, Method.WHITEBOX_DEPENDENCE)}


def competence(task: str) -> str:
    """Results-file name of a task's competence (the verdict page's gate on the task)."""
    return result(task, COMPETENCE)


def tasks_run(params: Any) -> list[str]:
    """The tasks a run with these params evaluates (None: every task)."""
    return [name for name in TASKS if params is None or params.tasks.run(name)]


def gap_sign(task: str, quantity: str | None = None) -> Sign:
    """A black-box gap's sign: the task's first group's metric minus its second's (`Task.groups`: female or Black
    first, the concept's T+ pole)."""
    return Sign(quantity=quantity or TASKS[task].metric_name, plus=poles(TASKS[task].concept)[0],
                minus=poles(TASKS[task].concept)[1])


def slope_sign(task: str, vector: str) -> Sign:
    """A white-box slope's sign: the metric's change per unit of lambda along `vector`, +1 towards the concept's T+
    pole (steering chapter, concept scores), across the run's lambda grid."""
    plus, minus = poles(TASKS[task].concept)
    return Sign(quantity=TASKS[task].metric_name, plus=plus, minus=minus, step="unit of λ", along=vector,
                span=LAMBDA_SPAN, grid="tasks.lambdas")


def _dependence_signs(task: str) -> tuple[Sign, Sign]:
    """A task's dependence slopes' signs: per level of its task-relevant variable (concept score -1, 0, +1 from its
    lowest level to its highest, `SampledTask.levels`), and per unit of lambda along that concept's vector."""
    relevant, levels = TASKS[task].relevant, [score for score, _ in getattr(TASKS[task], "levels", ())]
    quantity = TASKS[task].metric_name
    plus, minus = f"higher {relevant}", f"lower {relevant}"
    return (Sign(quantity=quantity, plus=plus, minus=minus, step=f"level of {relevant}",
                 span=(min(levels), max(levels))),
            Sign(quantity=quantity, plus=plus, minus=minus, step="unit of λ", along=f"the {relevant} vector",
                 span=LAMBDA_SPAN, grid="tasks.lambdas"))


def _answers(tokenizer: Any, params: Any) -> str:
    """Why `tokenizer` cannot run the tasks these params run: two answer words of a task with one first token, so
    that one next-token distribution cannot tell them apart ('' where it can)."""
    clashes = []
    for task in tasks_run(params):
        try:
            answer_ids(tokenizer, TASKS[task].answers)
        except AuditError:
            clashes.append(task)
    if not clashes:
        return ""
    words = "; ".join(f"{task}: {', '.join(TASKS[task].answers)}" for task in clashes)
    skip = " ".join(f"--set tasks.sizes.{task}=0" for task in clashes)
    return (f"answer words share a first token for its tokenizer, so one next-token distribution cannot tell them "
            f"apart ({words}): skip those tasks with {skip}")


def _tests(params: Any) -> list[VerdictTest]:
    """Per task run: the black-box gaps of its variants, the white-box slope along its concept's main vector (which
    needs the task's white-box dependence test to pass), then its dependence tests where it has a task-relevant
    concept."""
    found = []
    for task in tasks_run(params):
        concept, own, metric = TASKS[task].concept, (("task", task),), TASKS[task].metric_name
        for variant in TASKS[task].black_box_variants:
            stated = "stated" if variant == "explicit" else "implied (names or dialect)"
            name = method(task, ESTIMATES[f"black-box {variant}"])
            found.append(VerdictTest(requirement=requirement(task), name=name,
                                     label=f"black-box gap, {concept} {stated}", resampled="cases", instruments=own,
                                     metric=metric, epsilon=GAP_EPSILON, sign=gap_sign(task),
                                     deployed=variant == "explicit"))
        main = CONCEPT_VECTORS[concept][0]
        found.append(VerdictTest(requirement=requirement(task), name=method(task, Method.WHITEBOX_SLOPE),
                                 label=f"white-box slope, steering {main}", resampled="cases",
                                 instruments=(*own, ("vector", main)), metric=metric, epsilon=SLOPE_EPSILON,
                                 needs=method(task, Method.WHITEBOX_DEPENDENCE), sign=slope_sign(task, main)))
        if (concept_relevant := TASKS[task].relevant) is not None:
            per_level, per_lambda = _dependence_signs(task)
            found += [
                VerdictTest(requirement=dependence(task), name=method(task, Method.BLACKBOX_DEPENDENCE),
                            label=f"black-box dependence, {concept_relevant} varied in the prompt", resampled="cases",
                            instruments=own, metric=metric, epsilon=LEVEL_EPSILON, kind="dependence",
                            sign=per_level),
                VerdictTest(requirement=dependence(task), name=method(task, Method.WHITEBOX_DEPENDENCE),
                            label=f"white-box dependence, steering the {concept_relevant} vector", resampled="cases",
                            instruments=own, metric=metric, epsilon=SLOPE_EPSILON, kind="dependence",
                            sign=per_lambda),
            ]
    return found


RESULTS = (
    Result(method("{task}", Method.BLACKBOX_EXPLICIT), "metric difference",
           "black-box gap with the attribute stated"),
    Result(method("{task}", Method.BLACKBOX_IMPLICIT), "metric difference", "black-box gap with the attribute implied "
           "(names or dialect)"),
    Result(method("{task}", Method.WHITEBOX_SLOPE), "metric per unit lambda", "white-box slope of the metric along the "
           "concept's main vector"),
    Result(method("{task}", Method.WHITEBOX_EXACT_AT_0), "metric per unit lambda", "the slope's exact derivative at "
           "lambda = 0, the projection-edited point, along k v"),
    Result(method("{task}", Method.WHITEBOX_EQ2), "metric per unit of the vector's coordinate", "main paper Eq. 2 as "
           "written: the exact derivative at the unedited state along the unit vector (additive edit)"),
    Result(method("{task}", Method.WHITEBOX_REMOVED), "metric per unit lambda", "white-box slope with the concept "
           "removed from the prompt (name withheld, one dialect): an additional row, not the paper's design"),
    Result(result("{task}", "whitebox_slope_{dialect}"), "metric per unit lambda", "white-box slope of one "
           "speaker group's prompts (judicial: aal, wme)"),
    Result(method("{task}", Method.BLACKBOX_DEPENDENCE), "metric per unit concept score", "black-box dependence: slope "
           "of the metric on the task-relevant concept's score as the prompt varies it"),
    Result(method("{task}", Method.WHITEBOX_DEPENDENCE), "metric per unit lambda", "white-box dependence: slope of the "
           "metric along the task-relevant concept's vector"),
    ANSWER_MASS := Result(result("{task}", "answer_mass"), "probability", "what the model puts on the task's answer "
                          "words at all; small: the metric is a marginal preference"),
    COMPETENCE_RESULT := Result(competence("{task}"), "accuracy minus chance, or r with the decisive fact",
                                "0 is chance: a gap of a task the model cannot do is not bias (gate: lower bound "
                                "above 0)"),
)
ESTIMATES: dict[str, Method] = {  # label -> method
    "black-box explicit": Method.BLACKBOX_EXPLICIT, "black-box implicit": Method.BLACKBOX_IMPLICIT,
    "white-box slope": Method.WHITEBOX_SLOPE, "white-box exact at 0": Method.WHITEBOX_EXACT_AT_0,
    "white-box Eq. 2": Method.WHITEBOX_EQ2, "white-box concept removed": Method.WHITEBOX_REMOVED,
    "white-box AAL speakers": Method.WHITEBOX_SLOPE_AAL, "white-box WME speakers": Method.WHITEBOX_SLOPE_WME,
    "black-box dependence": Method.BLACKBOX_DEPENDENCE, "white-box dependence": Method.WHITEBOX_DEPENDENCE,
}


def _headlines(task: str) -> tuple[Headline, ...]:
    """A task's competence (whether the model does it at all) and answer mass (whether it answers at all)."""
    scored = "accuracy minus chance" if TASKS[task].chance is not None else "r with the decisive fact"
    found = COMPETENCE_RESULT.headline(f"{task}: competence", task=task)
    return (Headline(found.name, found.label, scored, found.meaning),
            ANSWER_MASS.headline(f"{task}: answer mass", task=task))


GATES = (
    Gate(instrument="task", name=COMPETENCE, label="competence lower bound", column="lo", threshold="task_competence",
         default=0.0, top=1, strict=True,
         failing="the interval does not exclude chance: the model's decisions carry no task signal to be biased",
         unrecorded="the task has no gold answer or decisive fact"),
)

def _versioned() -> dict[str, tuple[tuple[Path, ...], str]]:
    """Per task, the modules that build its prompts (the task's and the base it builds on) and its own settings (the
    judicial module serves two tasks: its answer words), which its version in results.json hashes."""
    base = Path(inspect.getfile(TaskItem))
    return {name: ((base, Path(inspect.getfile(type(task)))), repr(sorted(vars(task).items())))
            for name, task in TASKS.items()}


CHAPTER = ChapterSpec(key="decision_tasks", title="Four decision tasks",
                      computing=("data", "models", "chapters.steering_vectors", "chapters.decision_tasks"),
                      section="tasks", params=TaskParams, verdict_tests=_tests, answers=_answers, gates=GATES,
                      results=RESULTS, headlines=tuple(h for task in TASKS for h in _headlines(task)),
                      needs=probabilities_only,  # the white-box parts where the engine steers (`Engine.steers`)
                      versioned=_versioned)
