"""The bottom line of an audit: one generated sentence per model and a tally, from the verdict rows of a results.json
document alone, by these rules (the report's first screen and the index state them too):

1. Tally: how many requirements take each verdict, in the order fail, inconclusive, pass, not measurable.
2. No measurable test at all: the audit says nothing about bias either way (every instrument failed a gate).
3. Every requirement passes: every measurable test's interval lies inside its margin.
4. Some requirement fails: the instruments its failing tests come from (black-box gaps, white-box slopes, sentiment
   probes), "only" where that is one kind; then, per other kind of instrument, what its tests of the failing
   requirements say (e.g. "their black-box gaps: 2 pass, 2 inconclusive"), so a fail seen only under steering reads
   as such.
5. Nothing fails but something is inconclusive: how many requirements need more cases to decide.
6. Instruments of one kind conflict: a requirement where two tests of one kind (the explicit and implicit gaps, a
   concept's two vectors) conflict, both 95% intervals excluding 0 with opposite signs, is named with both tests.
   This is the robustness chapter's conflict (main paper §4.5; `stats.conflict`, the one definition), so the first
   screen and the chapter's tables give one answer for each task. Tests that merely differ in verdict (one inside
   epsilon, one outside, same sign) do not conflict: more cases may reconcile them. Only measurable tests are read:
   a slope whose gate failed (e.g. its task's dependence test) measures nothing the verdict may rest on, so its
   interval names no conflict here, though the robustness chapter, which compares raw estimates, may flag one.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations
from typing import Any

import pandas as pd

from llmaudit.stats import Estimate, conflict
from llmaudit.verdict.verdicts import NOT_MEASURABLE, overall

OUTCOMES = ("fail", "inconclusive", "pass", NOT_MEASURABLE)
KINDS = {"black-box": "black-box gaps", "white-box": "white-box slopes", "probe": "sentiment-probe gaps"}
RULES = ("The bottom line is generated from the verdicts by fixed rules: the tally counts requirements per verdict; "
         "where a requirement fails it names the instruments its failing tests come from (\"only\" when one kind) and "
         "what the other instruments say about the same requirements; it names any requirement on which two measurable "
         "tests of one kind of instrument (explicit and implicit gaps, or a concept's two vectors) conflict: both 95% "
         "intervals exclude 0, with opposite signs (the robustness chapter's definition).")


@dataclass(frozen=True)
class BottomLine:
    """A model's tally ('14 requirements: 2 fail, ...') and its one-sentence bottom line."""

    tally: str
    sentence: str


def instrument(label: str) -> str:
    """The kind of instrument a test reads by its label: 'black-box', 'white-box' or 'probe'."""
    return next((kind for kind in ("black-box", "white-box") if label.startswith(kind)), "probe")


def short(requirement: str) -> str:
    """A requirement's short name: its text before the colon ('judicial_penalty')."""
    return requirement.split(":", 1)[0]


def _counts(verdicts: pd.Series) -> str:
    """'2 pass, 2 inconclusive' in the order of OUTCOMES."""
    found = verdicts.value_counts()
    return ", ".join(f"{found[v]} {v}" for v in OUTCOMES if v in found)


def tally(table: pd.DataFrame) -> str:
    """Rule 1: '14 requirements: 2 fail, 3 inconclusive, 1 pass, 8 not measurable'."""
    worst = overall(table)
    return f"{len(worst)} requirement{'s' * (len(worst) != 1)}: {_counts(worst)}"


def _fails(table: pd.DataFrame, worst: pd.Series) -> list[str]:
    """Rule 4: where the fails come from and what the other instruments say about the failing requirements."""
    failing = table[table["requirement"].isin(worst[worst == "fail"].index)]
    failed = failing.loc[failing["verdict"] == "fail", "kind_of"]
    sources = list(dict.fromkeys(failed))
    named = " and ".join(KINDS[k] for k in sources)
    subject = "the fails come" if len(failed) > 1 else "the fail comes"
    clauses = [f"{subject} from {named}{' only' if len(sources) == 1 else ''}"]
    for kind, tests in failing[~failing["kind_of"].isin(sources)].groupby("kind_of", sort=False):
        clauses.append(f"their {KINDS[str(kind)]}: {_counts(tests['verdict'])}")
    return clauses


def _conflicts(table: pd.DataFrame) -> list[str]:
    """Rule 6: per requirement and kind of instrument, the first two measurable tests that conflict
    (`stats.conflict`)."""
    found = []
    measurable = table[table["verdict"] != NOT_MEASURABLE]
    for (requirement, kind), tests in measurable.groupby(["requirement", "kind_of"], sort=False):
        rows = [(t.test, Estimate(float(t.score), float(t.lo), float(t.hi)))
                for t in tests.dropna(subset=["score", "lo", "hi"]).itertuples(index=False)]
        clash = next(((a, b) for a, b in combinations(rows, 2) if conflict(a[1], b[1])), None)
        if clash is not None:
            (above, _), (below, _) = sorted(clash, key=lambda test: -test[1].lo)
            found.append(f"the {KINDS[str(kind)]} conflict on {short(str(requirement))} ({above} above 0, "
                         f"{below} below 0)")
    return found


def bottom_line(document: dict[str, Any]) -> BottomLine | None:
    """The tally and sentence of a results.json document's verdicts by the module's rules; None without verdicts."""
    table = pd.DataFrame(document.get("verdicts", []))
    table = table[table["verdict"].isin(OUTCOMES)] if "verdict" in table else table.iloc[:0]  # a row no rule reads
    if table.empty:
        return None
    table = table.assign(kind_of=table["test"].map(instrument))
    worst, counted = overall(table), tally(table)
    clauses: list[str] = []
    if (worst == NOT_MEASURABLE).all():
        clauses.append("no test was measurable (every test's instrument failed a gate), so this audit says nothing "
                       "about bias either way")
    elif (worst == "pass").all():
        clauses.append("every measurable test's 95% interval lies inside its margin")
    elif (worst == "fail").any():
        clauses += _fails(table, worst)
    else:
        undecided = int((worst == "inconclusive").sum())
        clauses.append(f"nothing fails, but {undecided} requirement{'s need' if undecided != 1 else ' needs'} more "
                       "cases to decide")
    clauses += _conflicts(table)
    model = document.get("config", {}).get("name") or "The model"
    return BottomLine(counted, f"{model}: {counted}; {'; '.join(clauses)}.")
