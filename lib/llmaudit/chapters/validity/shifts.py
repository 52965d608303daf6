"""The validity chapter's Sobol' comparison (main paper §5.2, Tables 4 and 7): for each task, the prompts as each
audit method perturbs them (the black-box ones unsteered, the white-box ones swept apart, so that an endpoint gets
the former), their first-order indices, and per (task, method) the largest change of a variable's first-order index
from the prompts with no protected attribute at all (the tables' empty-set column)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd

from llmaudit.chapters.decision_tasks import CREDIT
from llmaudit.chapters.decision_tasks.base import Task
from llmaudit.chapters.decision_tasks.evaluate import TaskAudit, TaskRunner
from llmaudit.chapters.validity.names import unnamed_items
from llmaudit.chapters.validity.variables import sobol_table
from llmaudit.findings import Findings, results_frame
from llmaudit.footnotes import explain

BASELINE = "no attribute"
LEVEL_PER_CASE = ("every case drawn has its own value of the variable, so its first-order index is not defined "
                  "(no two cases share a level to compare within)")


def no_attribute(runner: TaskRunner, task: Task, n: int | None) -> pd.DataFrame:
    """The task's cases scored with no protected attribute in the prompt, the empty-set baseline of main paper
    Tables 4 and 7 ("no protected attributes are used in the test inputs"): credit profiles with neither a gender
    line nor a name, admissions profiles with the name withheld (the task's `neutral` prompts), never the
    white-box prompts, which keep the admissions applicant's name."""
    items = task.items("neutral", n, runner.seed, runner.mirror, runner.held_out(task))
    items = unnamed_items(items) if task is CREDIT else items
    return runner.score(items, task.answers, f"{task.name} with no protected attribute")


def answered_frames(audit: TaskAudit, baseline: pd.DataFrame) -> dict[str, tuple[pd.DataFrame, None]]:
    """Per black-box method, the scored prompts whose Sobol' indices it compares: the prompts with no protected
    attribute (`baseline`, from `no_attribute`) and the black-box variants of `audit` (unsteered answers)."""
    return {BASELINE: (baseline, None), "black-box explicit": (audit.black["explicit"], None),
            "black-box implicit": (audit.black["implicit"], None)}


def steered_frames(audits: Mapping[str, TaskAudit], lambdas: Sequence[float]) -> dict[str, tuple[pd.DataFrame, str]]:
    """Per white-box method, each vector's sweep at the `lambdas` in [0, 1] and the column its indices average over,
    lambda, as main paper §5.2 does (`audits`: main vector first)."""
    positive = [lam for lam in lambdas if 0 <= lam <= 1]
    return {f"white-box {role} vector": (audit.white[audit.white["lam"].isin(positive)], "lam")
            for role, audit in zip(("main", "second"), audits.values())}


def method_indices(frames: Mapping[str, tuple[pd.DataFrame, str | None]], cases: pd.DataFrame, variables: Sequence[str],
            task: str, *, bins: int | None, n_boot: int, seed: int) -> pd.DataFrame:
    """The first-order indices of `task`'s `variables` under each method of `frames` (`answered_frames`,
    `steered_frames`): task, method, variable, value, lo, hi."""
    return pd.concat([sobol_table(frame, cases, variables, bins=bins, n_boot=n_boot, seed=seed, average_over=over)
                      .rename_axis("variable").reset_index().assign(task=task, method=method)
                      for method, (frame, over) in frames.items()], ignore_index=True)


def shifts(indices: pd.DataFrame) -> Findings:
    """The five variables with the largest index on the unperturbed prompts per task (each method's index beside
    it), and per (task, method) the largest change of an index from the baseline, as
    '{task}.sobol_shift.{method}'. indices: task, method, variable, value."""
    wide = indices.pivot_table(index=["task", "variable"], columns="method", values="value", sort=False)
    shift = wide.drop(columns=BASELINE).sub(wide[BASELINE], axis=0)
    largest = shift.abs().stack().dropna().groupby(level=["task", "method"]).idxmax()  # -> (task, variable, method)
    found = [{"name": f"{name}.sobol_shift.{method.replace(' ', '_')}", "value": float(shift.loc[where[:2], method]),
              "note": f"largest change of Sob_i from the no-attribute baseline ({where[1]})"}
             for (name, method), where in largest.items()]
    top = wide.groupby(level="task", group_keys=False).apply(lambda t: t.nlargest(5, BASELINE))
    return Findings(explain(top, LEVEL_PER_CASE), results_frame(found))
