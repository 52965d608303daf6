"""The first screen's "what this means and its limits": what a verdict does and does not say, the gate rule every
test of a kind shares and where an audit's tests are read with a gate not checked (the stated exception), how many
requirements cannot be assessed and why (grouped by the gate that fails, in plain words), and which fails do not
survive Holm's correction. Built from a results.json document's verdict rows alone."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from llmaudit.report.bottom_line import short
from llmaudit.verdict.gates import GATES, NOT_CHECKED
from llmaudit.verdict.verdicts import NOT_MEASURABLE, overall

MEANING = ("A fail means the test's 95% interval lies wholly outside ±ε: on these prompts the effect is larger than "
           "the margin the params allow; a pass, wholly inside; inconclusive, more cases are needed. Not measurable "
           "means the instrument did not work (a gate failed), which says nothing about bias either way. Every "
           "verdict holds for this model, these prompts and these sizes only.")
GATE_RULE = ("One gate rule for every test of a kind: a black-box gap needs its task's competence gate; a white-box "
             "slope, along either vector of its concept, needs its task's competence gate, both of its vector's gates "
             "and its task's white-box dependence test; a dependence test, its task's competence gate; a "
             "sentiment-probe gap, its classifier's two gates. Where a task has no such number (no gold answer, or "
             "no task-relevant concept), that gate is not checked, and the exception is listed here.")


def shared_unmet(tests: pd.DataFrame) -> list[str]:
    """Why no test of a requirement is measurable: the unmet gates every test shares, else the first test's."""
    unmet = [tuple(u) for u in tests["unmet"]]
    return [u for u in unmet[0] if all(u in other for other in unmet[1:])] or list(unmet[0])


def _meaning(brief: str) -> str:
    """What a failed gate's brief means, by the gate that reads it (the brief itself where no declared gate does)."""
    subject, _, rest = brief.partition(" ")
    gate = next((g for g in GATES if rest.startswith(g.label.removesuffix(" lower bound"))), None)
    return gate.failure(subject) if gate is not None and "not checked" not in brief else brief


def plain(brief: str) -> str:
    """A failed gate's brief followed by what its failure means, e.g. 'credit competence ..., needs lower bound > 0
    (the interval does not exclude chance: ...)'."""
    meaning = _meaning(brief)
    return brief if meaning == brief else f"{brief} ({meaning})"


def _unassessable(table: pd.DataFrame, worst: pd.Series) -> str:
    """'9 of 13 requirements cannot be assessed. 8 (credit ×2, ...): the interval does not exclude chance: ...
    (credit competence +0.4497 [-0.9006, +0.9850], needs lower bound > 0; ...).', grouped by what the failed gate
    means."""
    lost = worst[worst == NOT_MEASURABLE].index
    if not len(lost):
        return ""
    groups: dict[str, tuple[list[str], list[str]]] = {}
    for requirement in lost:
        for brief in shared_unmet(table[table["requirement"] == requirement])[:1]:
            names, briefs = groups.setdefault(_meaning(brief), ([], []))
            names.append(short(str(requirement)))
            briefs.extend(b for b in [brief] if b not in briefs)
    parts = []
    for why, (names, briefs) in groups.items():
        counted = ", ".join(f"{name}{f' ×{names.count(name)}' if names.count(name) > 1 else ''}"
                            for name in dict.fromkeys(names))
        parts.append(f"{len(names)} ({counted}): {why} ({'; '.join(briefs)}).")
    return f"{len(lost)} of {len(worst)} requirements cannot be assessed. " + " ".join(parts)


def _unchecked(table: pd.DataFrame) -> str:
    """The measurable tests read with a gate not checked, per task, with why (the gate rule's stated exception)."""
    read = table[(table["verdict"] != NOT_MEASURABLE) & (table["gate"] == NOT_CHECKED)]
    found: dict[str, list[str]] = {}
    for t in read.itertuples(index=False):
        task = short(str(t.requirement))
        found.setdefault(task, []).extend(str(u).removeprefix(task).lstrip(" .") for u in t.unmet)
    if not found:
        return ""
    by_why: dict[str, list[str]] = {}
    for task, whys in found.items():
        by_why.setdefault("; ".join(dict.fromkeys(whys)), []).append(task)
    return "Exception to the gate rule: " + " ".join(
        f"{', '.join(tasks)} {'are' if len(tasks) > 1 else 'is'} read with {why}." for why, tasks in by_why.items())


def _holm(table: pd.DataFrame) -> str:
    """The fails that do not survive Holm's correction across the page's measurable invariance tests."""
    weak = table[(table["verdict"] == "fail") & (table["holm"] == "does not survive")]
    if weak.empty:
        return ""
    named = ", ".join(f"{short(str(t.requirement))} ({t.test}, p_adj = {t.p_holm:.2g})"
                      for t in weak.itertuples(index=False))
    return (f"{len(weak)} fail{'s do' if len(weak) > 1 else ' does'} not survive Holm's correction across the "
            f"page's tests: {named}; at these sizes such a fail may be chance.")


def limits(document: Mapping[str, Any]) -> list[str]:
    """The limits block's paragraphs for a results.json document ([] without verdicts)."""
    table = pd.DataFrame(document.get("verdicts", []))
    if table.empty:
        return []
    table["p_holm"] = table["p_holm"].astype(float)
    found = [MEANING, _unassessable(table, overall(table)), GATE_RULE, _unchecked(table), _holm(table)]
    return [paragraph for paragraph in found if paragraph]
