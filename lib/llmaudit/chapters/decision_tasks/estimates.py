"""The decision-tasks chapter's estimates of its audits: per task the black-box gaps, the white-box slope (pooled, per
dialect, with the concept removed) and exact derivatives, the dependence tests, the answer mass and the competence,
as the chapter shows them and as it records them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from llmaudit.capabilities import NO_WEIGHTS
from llmaudit.chapters.decision_tasks.evaluate import TaskAudit
from llmaudit.chapters.decision_tasks.spec import DIALECTS, ESTIMATES, Method, competence, method
from llmaudit.findings import results_frame
from llmaudit.footnotes import explain
from llmaudit.spec import result
from llmaudit.stats import Estimate, case_slopes

SPEAKERS = "speakers"  # a sweep figure's curve per speaker group (judicial), beside a vector's or stated group's
# Why a task has no estimate of a kind where its design takes none (where it takes one and the estimate failed, the
# reason is the estimate's own: `Estimates.why`)
NOT_TAKEN = {
    "black-box implicit": "the task has no implicit prompts: its group is only ever stated",
    "white-box AAL speakers": "only the judicial tasks' prompts come in two speakers' dialects",
    "white-box WME speakers": "only the judicial tasks' prompts come in two speakers' dialects",
    "white-box concept removed": "the task's white-box prompts already have the concept removed",
    "black-box dependence": "the task has no task-relevant variable to test dependence on",
    "white-box dependence": "the task has no task-relevant variable to test dependence on",
    "white-box exact at 0": "the exact derivative is taken on local models only",
    "white-box Eq. 2": "the exact derivative is taken on local models only",
}
ONE_CASE = "a group of one case has no slope: the bootstrap resamples cases"


@dataclass(frozen=True)
class Estimates:
    """A chapter run's estimates: `table` (one row per task and method: value, lo, hi), `results` (indexed by
    results-file name, for `Chapter.record_table`), each task's competence (None: the task has no gold answer
    or decisive fact) and why an estimate its task takes is missing (by task and method)."""

    table: pd.DataFrame
    results: pd.DataFrame
    competences: dict[str, Estimate | None]
    why: dict[tuple[str, str], str]


def _competence_note(audit: TaskAudit) -> str:
    """What a task's competence score is."""
    return "accuracy minus chance" if audit.task.chance is not None else "r of the metric with the decisive fact"


def _cases(audit: TaskAudit, label: str) -> int:
    """The cases an estimate's bootstrap resampled: a black-box gap's cases with both groups (those of its own
    prompts), a dependence test's or the concept-removed sweep's own cases, else the white-box sweep's cases."""
    if label in ("black-box explicit", "black-box implicit"):
        return len(audit.case_gaps(label.removeprefix("black-box ")))
    dependence = audit.dependence
    own = {"black-box dependence": None if dependence is None else dependence.black,
           "white-box dependence": None if dependence is None else dependence.white,
           "white-box concept removed": audit.removed}.get(label)
    return len(case_slopes(audit.white if own is None else own))


UNANSWERED = "not measurable: fewer than two cases whose sampled answers named an answer word"  # a sampled read's


def unmeasured(audit: TaskAudit, variant: str) -> str | None:
    """Why a black-box gap is not measurable (None: it is, or the task lacks the variant): a prompt's top-k read
    covering less of the answer words' mass than `TaskAudit.min_coverage` (`models.endpoint.modes`: the metric is off
    by up to 1 - coverage), or fewer than two cases with the metric in both groups (sampled answers naming none)."""
    frame = audit.black.get(variant)
    if frame is None:
        return None
    if "coverage" in frame and (low := frame["coverage"] < audit.min_coverage).any():
        return (f"not measurable: {int(low.sum())} of {len(frame)} prompts' top-k reads cover less than "
                f"{audit.min_coverage:g} of the answer words' probability (least {frame['coverage'].min():.3f}; "
                "model.min_coverage)")
    named = frame.dropna(subset=["metric"])
    if set(audit.task.groups) - set(named["group"]) or len(audit.case_gaps(variant)) < 2:
        return f"{UNANSWERED} in both groups"
    return None


def unanswered(audit: TaskAudit, score: Estimate | None) -> dict[str, str]:
    """Why each of a task's other black-box estimates is missing where its reads lack a metric (sampled answers that
    named no answer word): the black-box dependence slope (two cases with answers at two concept levels) and the
    competence `score` (two cases, four for a correlation); empty where every read has one (a probability read)."""
    dependence = audit.dependence
    frames = [*audit.black.values(), *([] if dependence is None else [dependence.black])]
    if not any(frame["metric"].isna().any() for frame in frames):
        return {}
    missing = {} if dependence is None or len(case_slopes(dependence.black)) > 1 else {
        "black-box dependence": f"{UNANSWERED} at two concept levels"}
    if score is None and (audit.task.chance is not None or audit.black["explicit"]["fact"].notna().any()):
        missing["competence"] = UNANSWERED.replace("two", "two" if audit.task.chance is not None else "four")
    return missing


def estimates(audits: Mapping[str, TaskAudit], boot: int, seed: int) -> Estimates:
    """Every task's estimates; the results per task: its estimates of `ESTIMATES` it has, its answer mass, then its
    competence where it has one."""
    competences = {name: audit.competence(boot, seed) for name, audit in audits.items()}
    rows: list[dict[str, Any]] = []
    found: list[dict[str, Any]] = []
    why: dict[tuple[str, str], str] = {}
    for name, audit in audits.items():
        unmet = {f"black-box {variant}": unmeasured(audit, variant) for variant in ("explicit", "implicit")}
        missing = unanswered(audit, competences[name])
        gone = {label: reason for label, reason in (unmet | missing).items() if reason}
        found += [{"name": competence(name) if label == "competence" else method(name, ESTIMATES[label]),
                   "value": None, "note": reason} for label, reason in gone.items()]
        why |= {(name, label): reason for label, reason in gone.items()}
        drawn = {f"black-box {variant}": None if unmet[f"black-box {variant}"] else audit.gap(variant, boot, seed)
                 for variant in ("explicit", "implicit")}
        if audit.sweep is None:  # not steered: the verdict page's white-box tests say why
            why |= {(name, label): NO_WEIGHTS for label in ESTIMATES if label.startswith("white-box")}
            found += [{"name": method(name, test), "value": None, "note": NO_WEIGHTS}
                      for test in (Method.WHITEBOX_SLOPE, Method.WHITEBOX_DEPENDENCE)
                      if test == Method.WHITEBOX_SLOPE or audit.dependence is not None]
        else:
            drawn |= {"white-box slope": audit.slope(boot, seed),
                      "white-box exact at 0": audit.slope_at_zero(boot, seed),
                      "white-box Eq. 2": audit.slope_at_zero(boot, seed, "eq2"),
                      "white-box concept removed": audit.removed_slope(boot, seed)}
        if audit.sweep is not None and per_dialect(audit):
            drawn |= {f"white-box {speakers.upper()} speakers": audit.slope(boot, seed, group)
                      for group, speakers in DIALECTS.items()}
        drawn |= {f"{kind} dependence": est for kind, est in audit.dependence_slopes(boot, seed).items()}
        for label, est in drawn.items():
            if est is None:
                continue
            found.append({"name": method(name, ESTIMATES[label]), "value": est.value, "lo": est.lo, "hi": est.hi,
                          "note": audit.task.metric_name, "n": _cases(audit, label)})
            rows.append({"task": name, "method": label, "value": est.value, "lo": est.lo, "hi": est.hi})
        found.append({"name": result(name, "answer_mass"), "value": audit.mass()})
        if (score := competences[name]) is not None:
            found.append({"name": competence(name), "value": score.value, "lo": score.lo, "hi": score.hi,
                          "note": _competence_note(audit),
                          "n": int(audit.black["explicit"].dropna(subset=["metric"])["case"].nunique())})
    return Estimates(pd.DataFrame(rows, columns=["task", "method", "value", "lo", "hi"]), results_frame(found),
                     competences, why)


def group_slopes(audit: TaskAudit, boot: int, seed: int) -> pd.DataFrame:
    """The white-box slope of each group's prompts (a dialect, a name group) beside the pooled one, with the cases
    behind each (no estimate for a group of one case)."""
    cases = audit.white.groupby("group")["case"].nunique().to_dict() | {None: audit.white["case"].nunique()}
    none = Estimate(float("nan"), float("nan"), float("nan"))  # one case: no interval to draw
    table = pd.DataFrame({group or "pooled": {**vars(audit.slope(boot, seed, group) if n > 1 else none), "cases": n}
                          for group, n in cases.items()}).T
    return explain(table, ONE_CASE)


def dependence_table(audits: Mapping[str, TaskAudit], boot: int, seed: int) -> pd.DataFrame:
    """Per task with dependence measurements: its task-relevant concept, the black-box and the white-box dependence
    slope with their intervals side by side, and the task vector's block and scale."""
    rows = {}
    for name, audit in audits.items():
        if audit.dependence is None:
            continue
        slopes = audit.dependence_slopes(boot, seed)
        vector = audit.dependence.vector
        rows[name] = {"concept": audit.dependence.concept, "layer": None if vector is None else vector.layer,
                      "k": None if vector is None else vector.k,
                      **{f"{kind} {part}": getattr(est, part) for kind, est in slopes.items()
                         for part in ("value", "lo", "hi")}}
    return pd.DataFrame(rows).T


def summary(found: Estimates, audits: Mapping[str, TaskAudit], verdicts: Sequence[str]) -> pd.DataFrame:
    """Per task: the white-box slope's verdict (`verdicts`, in task order) first with what explains it (the slope
    and its interval, the competence with its interval, the answer mass, the number of cases), then the other
    estimates side by side, so that a table wider than its page still shows why a task is not measurable."""
    table = found.table
    wide = table.pivot_table(index="task", columns="method", values="value", sort=False)
    slopes = table[table["method"] == "white-box slope"].set_index("task")
    wide["white-box 95% CI"] = [f"[{lo:+.3f}, {hi:+.3f}]" for lo, hi in zip(slopes["lo"], slopes["hi"])]
    wide["verdict"] = verdicts
    wide["answer mass"] = [audits[name].mass() for name in wide.index]
    wide["competence"] = [f"{c.value:+.3f} [{c.lo:+.3f}, {c.hi:+.3f}]" if (c := found.competences[name]) else "n/a"
                          for name in wide.index]
    wide["cases"] = [audits[name].white["case"].nunique() for name in wide.index]
    first = ["verdict", "white-box slope", "white-box 95% CI", "competence", "answer mass", "cases"]
    wide = wide[first + [column for column in wide.columns if column not in first]]
    reasons = pd.DataFrame({label: [found.why.get((name, label), NOT_TAKEN.get(label)) for name in wide.index]
                            for label in wide.columns}, index=wide.index)
    return explain(wide, reasons)


def per_dialect(audit: TaskAudit) -> bool:
    """Whether a task's white-box prompts come in the two dialects' speaker groups (judicial)."""
    return set(audit.white["group"]) == set(DIALECTS)


def sweeps(audits: Mapping[str, TaskAudit]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The sweep figure's data: each task's mean curve over lambda (judicial: one per speakers' dialect, as the main
    paper's Fig. 2), and its black-box group means (judicial: of the implicit prompts, the speakers' own dialect, as
    Fig. 2; else of the explicit ones, as Fig. 4), both with a `panel` naming the task and its metric and a `curve`
    naming the vector, the speakers or the stated group, and a `kind` saying which of the three it is (the figure
    gives each kind its own legend)."""
    panel = {name: f"{name}: {audit.task.metric_name}" for name, audit in audits.items()}
    curves, levels = [], []
    for name, audit in audits.items():
        if per_dialect(audit):
            named = {group: f"{speakers.upper()} speakers" for group, speakers in DIALECTS.items()}
            own = [audit.curve(group).assign(curve=label, kind=SPEAKERS) for group, label in named.items()]
            means = audit.group_means("implicit").assign(kind=SPEAKERS)
            means["curve"] = means["group"].map(named)
        else:
            own = [audit.curve().assign(curve=audit.vector.name, kind="steering vector")]
            means = audit.group_means().assign(curve=lambda frame: frame["group"], kind="stated group")
        curves += [frame.assign(panel=panel[name]) for frame in own]
        levels.append(means.assign(panel=panel[name]))
    return pd.concat(curves, ignore_index=True), pd.concat(levels, ignore_index=True)
