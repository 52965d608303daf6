"""The robustness chapter's comparisons (main paper §4.5): per task, its two black-box gaps (explicit and implicit)
and its white-box slopes along its concept's two vectors, each pair read for a conflict, with the results the
chapter records about them."""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from llmaudit.chapters.decision_tasks.evaluate import TaskAudit
from llmaudit.chapters.decision_tasks.spec import Method, method
from llmaudit.chapters.robustness.spec import second_slope
from llmaudit.chapters.steering_vectors import CONCEPT_VECTORS, SteeringVector
from llmaudit.findings import Findings, results_frame
from llmaudit.spec import result
from llmaudit.stats import Estimate, conflict, pearson

Audits = Mapping[tuple[str, str], TaskAudit]  # (task, vector name) -> the task's audit steered by that vector


def _interval(est: Estimate) -> str:
    """A 95% interval as the tables print it."""
    return f"[{est.lo:+.3f}, {est.hi:+.3f}]"


def _main(audits: Audits) -> dict[str, TaskAudit]:
    """Per task run, its audit along its concept's main vector."""
    return {task: audit for (task, vector), audit in audits.items()
            if vector == CONCEPT_VECTORS[audit.task.concept][0]}


def black_box(audits: Audits, boot: int, seed: int) -> Findings:
    """Per task with an implicit variant: its explicit and implicit gaps and whether they conflict
    ('{task}.blackbox_conflict')."""
    rows, found = [], []
    for task, audit in _main(audits).items():
        explicit, implicit = audit.gap("explicit", boot, seed), audit.gap("implicit", boot, seed)
        if implicit is None:  # the task has no implicit variant
            continue
        assert explicit is not None  # every task has explicit prompts
        clash = conflict(explicit, implicit)
        found.append({"name": result(task, "blackbox_conflict"), "value": clash})
        rows.append({"task": task, "explicit": explicit.value, "explicit CI": _interval(explicit),
                     "implicit": implicit.value, "implicit CI": _interval(implicit), "conflict": clash})
    return Findings(pd.DataFrame(rows).set_index("task"), results_frame(found))


def cosines(vectors: Mapping[str, SteeringVector]) -> dict[str, float]:
    """Per concept, the cosine between its two vectors."""
    return {concept: vectors[a].cosine(vectors[b]) for concept, (a, b) in CONCEPT_VECTORS.items()}


def white_box(audits: Audits, vectors: Mapping[str, SteeringVector], boot: int, seed: int) -> Findings:
    """Per task: its slopes along its concept's two vectors and whether they conflict; the results are the concepts'
    cosines ('cos.{concept}'), then per task the slope along the second vector and the conflict; the estimates name
    each slope's test on the verdict page."""
    cosine = cosines(vectors)
    found = [{"name": result("cos", concept), "value": value, "note": " vs ".join(CONCEPT_VECTORS[concept])}
             for concept, value in cosine.items()]
    rows, estimates, cases = [], [], []
    for task, first in _main(audits).items():
        concept = first.task.concept
        second = audits[(task, CONCEPT_VECTORS[concept][1])]
        a, b = first.slope(boot, seed), second.slope(boot, seed)
        clash, key = conflict(a, b), second_slope(task, second.vector.name)
        cases.append(second.cases({"slope": key}))
        found += [{"name": key, "value": b.value, "lo": b.lo, "hi": b.hi, "note": first.task.metric_name,
                   "n": second.white["case"].nunique()},
                  {"name": result(task, "whitebox_conflict"), "value": clash}]
        rows.append({"task": task, "vectors": " / ".join(CONCEPT_VECTORS[concept]), "cos": cosine[concept],
                     "slope 1": a.value, "slope 1 CI": _interval(a), "slope 2": b.value, "slope 2 CI": _interval(b),
                     "conflict": clash})
        tested = ((first, a, method(task, Method.WHITEBOX_SLOPE)), (second, b, key))
        estimates += [{"task": task, "method": audit.vector.name, "value": est.value, "lo": est.lo, "hi": est.hi,
                       "test": test} for audit, est, test in tested]
    return Findings(pd.DataFrame(rows).set_index("task"), results_frame(found),
                      pd.DataFrame(estimates), cases)


def case_agreement(audits: Audits) -> pd.DataFrame:
    """Per task, the Pearson r of its per-case slopes under its concept's two vectors (tasks with at least 4 shared
    cases that vary under both)."""
    agreement = {}
    for task, first in _main(audits).items():
        second = audits[(task, CONCEPT_VECTORS[first.task.concept][1])]
        a, b = first.case_slopes().align(second.case_slopes(), join="inner")
        if len(a) >= 4 and a.std() > 0 and b.std() > 0:
            r = pearson(a.to_numpy(), b.to_numpy())
            agreement[task] = {"cases": len(a), "r": r.value, "95% CI": f"[{r.lo:+.2f}, {r.hi:+.2f}]"}
    return pd.DataFrame(agreement).T
