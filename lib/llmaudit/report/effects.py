"""A verdict test's score as a sentence in the decision's own units and direction: percentage points of the task's
rate (every metric the verdict tests read is a rate, a probability or an accuracy in [0, 1]), with which group is
higher, or, for a slope, where lambda = +1 steers and how far the rate moves per unit and across the sweep. The
direction is the test's declared `Sign` (black-box gaps: female or Black first; steering: the concept score's T+
pole at lambda = +1, steering chapter, Eq. 1), the numbers are the verdict row's."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import cache
from typing import Any

import yaml

from llmaudit.registry import verdict_tests
from llmaudit.spec import Sign
from llmaudit.units import SLACK
from llmaudit.verdict.verdicts import NOT_MEASURABLE


@cache
def signs() -> dict[str, Sign]:
    """Every registered verdict test's sign, by its results-file name."""
    return {test.name: test.sign for test in verdict_tests()}


@cache
def deployed() -> frozenset[str]:
    """The results-file names of the tests a deployed user triggers (`VerdictTest.deployed`)."""
    return frozenset(test.name for test in verdict_tests() if test.deployed)


def points(share: float) -> str:
    """A share in [0, 1] as unsigned percentage points, two significant places below 1 pp ('22.8', '0.45')."""
    pp = abs(100 * share)
    return f"{pp:.1f}" if pp >= 1 else f"{pp:.2g}"


def _signed(share: float) -> str:
    """A share as signed percentage points ('+19.9', '-0.60')."""
    return ("-" if share < 0 else "+") + points(share)


def sweep(document: Mapping[str, Any], sign: Sign) -> tuple[float, float]:
    """The lowest and highest coefficient a slope's step is taken across: the grid at the sign's params path (e.g.
    'tasks.lambdas') as a chapter's recorded settings or else the params text the run read give it, else the sign's
    declared span (the default grid)."""
    default = sign.span or (-1.0, 1.0)
    if not sign.grid:
        return default
    section, _, key = sign.grid.partition(".")
    config = document.get("config", {})
    recorded = [(entry or {}).get("settings") or {} for entry in config.get("chapters", {}).values()]
    grid = next((found[section][key] for found in recorded if key in (found.get(section) or {})), None)
    if grid is None:
        try:
            grid = ((yaml.safe_load(config.get("text") or "") or {}).get(section) or {}).get(key)
        except (yaml.YAMLError, AttributeError):  # a half-written or odd params text: the default grid
            grid = None
    return (float(min(grid)), float(max(grid))) if grid else default


def _interval(row: Mapping[str, Any], sign: Sign) -> str:
    """The score's 95% interval in signed pp, saying where it reaches the values the score can take (`Sign.bounds`,
    where its chapter clips it): clipped at the end it reaches, or, reaching both, the whole range, which says
    nothing about the score."""
    ci = f"95% CI {_signed(row['lo'])} to {_signed(row['hi'])} pp"
    if sign.bounds is None:
        return ci
    low, high = sign.bounds
    ends = [end for end, reached in (("lower", row["lo"] <= low + SLACK), ("upper", row["hi"] >= high - SLACK))
            if reached]
    if len(ends) == 2:
        units = f"{row['n']} {row['resampled']}" if row.get("n") else f"its {row['resampled']}"
        return (f"95% CI clipped to {_signed(low)} to {_signed(high)} pp, the whole range the score can take: {units} "
                "say nothing about it")
    return f"{ci}, clipped at the {ends[0]} end of the range the score can take" if ends else ci


def effect(row: Mapping[str, Any], sign: Sign, span: tuple[float, float]) -> str:
    """One test's score as a sentence, e.g. 'Steering along race_dial towards Black (λ = +1; -1 steers towards
    White) raises the death-penalty rate by 22.8 pp per unit of λ (95% CI +19.9 to +25.2 pp), about 45.6 pp
    across the sweep λ = -1 to +1.'"""
    score, ci = float(row["score"]), _interval(row, sign)
    if not sign.step:
        more = "higher" if score >= 0 else "lower"
        return (f"The {sign.quantity} is {points(score)} pp {more} for {sign.plus} than for {sign.minus} ({ci}, "
                f"{sign.plus} minus {sign.minus}).")
    verb = "raises" if score >= 0 else "lowers"
    low, high = span
    across = points(score * (high - low))
    if sign.along:
        return (f"Steering along {sign.along} towards {sign.plus} (λ = +1; -1 steers towards {sign.minus}) {verb} "
                f"the {sign.quantity} by {points(score)} pp per {sign.step} ({ci}), about {across} pp across the "
                f"sweep λ = {low:+g} to {high:+g}.")
    return (f"Each {sign.step} towards {sign.plus} {verb} the {sign.quantity} by {points(score)} pp ({ci}), about "
            f"{across} pp from the lowest to the highest level.")


def _cosine(document: Mapping[str, Any], a: str, b: str) -> float | None:
    """The recorded cosine of two vectors (the steering chapter's 'cos.{main}.{alternative}'), None where absent."""
    found = document.get("results", {}).get("steering_vectors", {})
    row = found.get(f"cos.{a}.{b}") or found.get(f"cos.{b}.{a}") or {}
    return row.get("value")


def said(document: Mapping[str, Any], row: Mapping[str, Any]) -> str:
    """A measurable test's effect as a sentence; for a test with no score, no sign or no verdict, why not."""
    sign = signs().get(str(row["name"]))
    if row.get("score") is None or sign is None or row["verdict"] == NOT_MEASURABLE:
        return f"Not measurable: {'; '.join(row.get('unmet') or ()) or 'no score recorded'}."
    return effect(row, sign, sweep(document, sign))


def explained(document: Mapping[str, Any], tests: Sequence[Mapping[str, Any]], decider: str) -> list[str]:
    """What a requirement's answer means, a sentence each: the deciding test's effect, then beside it the black-box
    gap with the attribute stated (what a user who states it triggers) and, where a white-box slope decides, the
    slopes along the concept's other vectors, with the two vectors' cosine."""
    by_name = {str(t["name"]): t for t in tests}
    along = getattr(signs().get(decider), "along", "")
    lines = [f"{by_name[decider]['test']} ({by_name[decider]['verdict']}): {said(document, by_name[decider])}"]
    for t in tests:
        name, sign = str(t["name"]), signs().get(str(t["name"]))
        other_vector = bool(along and sign and sign.along and t.get("kind") == "invariance")
        if name == decider or not (name in deployed() or other_vector):
            continue
        cosine = _cosine(document, along, sign.along) if other_vector and sign else None
        lines.append(f"Beside it, {t['test']} ({t['verdict']}): {said(document, t)}"
                     + (f" The two vectors' cosine is {cosine:.2f}." if cosine is not None else ""))
    return lines
