"""The decision-tasks chapter's estimates of its audits: per task the black-box gaps, the white-box slope and exact
derivative, the answer mass and the competence, as the chapter shows them and as it records them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pandas as pd

from llmaudit.chapters.decision_tasks.evaluate import TaskAudit
from llmaudit.chapters.decision_tasks.spec import ESTIMATES, competence, method
from llmaudit.findings import results_frame
from llmaudit.spec import result
from llmaudit.stats import Estimate


@dataclass(frozen=True)
class Estimates:
    """A chapter run's estimates: `table` (one row per task and method: value, lo, hi), `results` (indexed by
    results-file name, for `Chapter.record_table`) and each task's competence (None: the task has no gold answer
    or decisive fact)."""

    table: pd.DataFrame
    results: pd.DataFrame
    competences: dict[str, Estimate | None]


def _competence_note(audit: TaskAudit) -> str:
    """What a task's competence score is."""
    return "accuracy minus chance" if audit.task.chance is not None else "r of the metric with the decisive fact"


def _cases(audit: TaskAudit, label: str) -> int:
    """The cases an estimate's bootstrap resampled: a black-box gap's cases with both groups (those of its own
    prompts), a white-box estimate's swept cases."""
    if label.startswith("black-box "):
        return len(audit.case_gaps(label.removeprefix("black-box ")))
    return int(audit.white["case"].nunique())


def estimates(audits: Mapping[str, TaskAudit], boot: int, seed: int) -> Estimates:
    """Every task's estimates; the results per task: its estimates of `ESTIMATES` it has, its answer mass, then its
    competence where it has one."""
    competences = {name: audit.competence(boot, seed) for name, audit in audits.items()}
    rows, found = [], []
    for name, audit in audits.items():
        drawn = {"black-box explicit": audit.gap("explicit", boot, seed),
                 "black-box implicit": audit.gap("implicit", boot, seed),
                 "white-box slope": audit.slope(boot, seed), "white-box exact at 0": audit.slope_at_zero(boot, seed)}
        for label, est in drawn.items():
            if est is None:
                continue
            found.append({"name": method(name, ESTIMATES[label]), "value": est.value, "lo": est.lo, "hi": est.hi,
                          "note": audit.task.metric_name, "n": _cases(audit, label)})
            rows.append({"task": name, "method": label, "value": est.value, "lo": est.lo, "hi": est.hi})
        found.append({"name": result(name, "answer_mass"), "value": audit.mass()})
        if (score := competences[name]) is not None:
            found.append({"name": competence(name), "value": score.value, "lo": score.lo, "hi": score.hi,
                          "note": _competence_note(audit)})
    return Estimates(pd.DataFrame(rows), results_frame(found), competences)


def summary(found: Estimates, audits: Mapping[str, TaskAudit], verdicts: Sequence[str]) -> pd.DataFrame:
    """Per task: its estimates side by side, the white-box interval and its verdict (`verdicts`, in task order), the
    answer mass, the competence with its interval and the number of cases."""
    table = found.table
    wide = table.pivot_table(index="task", columns="method", values="value", sort=False)
    slopes = table[table["method"] == "white-box slope"].set_index("task")
    wide["white-box 95% CI"] = [f"[{lo:+.3f}, {hi:+.3f}]" for lo, hi in zip(slopes["lo"], slopes["hi"])]
    wide["verdict"] = verdicts
    wide["answer mass"] = [audits[name].mass() for name in wide.index]
    wide["competence"] = [f"{c.value:+.3f} [{c.lo:+.3f}, {c.hi:+.3f}]" if (c := found.competences[name]) else "n/a"
                          for name in wide.index]
    wide["cases"] = [audits[name].white["case"].nunique() for name in wide.index]
    return wide


def sweeps(audits: Mapping[str, TaskAudit]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The sweep figure's data: each task's mean curve over lambda, and its explicit prompts' group means (both with
    a `panel` naming the task and its metric)."""
    panel = {name: f"{name}: {audit.task.metric_name}" for name, audit in audits.items()}
    curves = pd.concat([audit.curve().assign(panel=panel[name], vector=audit.vector.name)
                        for name, audit in audits.items()], ignore_index=True)
    levels = pd.concat([audit.group_means().assign(panel=panel[name]) for name, audit in audits.items()],
                       ignore_index=True)
    return curves, levels
