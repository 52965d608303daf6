"""What a chapter declares about itself, in one place (its package's `spec` module): its key, its params section,
the verdict tests its results feed, and the packages whose code decides its forward passes. `llmaudit.registry`
lists the declarations; the audit's chapter list, params file, cache hash, verdict page and book contents are built
from them, so adding a chapter touches its own package, its notebook and one registration line."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from llmaudit.sections import Section


@dataclass(frozen=True)
class VerdictTest:
    """One invariance test of a requirement, as the verdict page reads it: the results-file name of its score, its
    label, the unit its bootstrap resampled, the instruments (kind, name) whose gates it must pass, and the metric
    its case records hold (the report's evidence names its columns by it)."""

    requirement: str
    name: str
    label: str
    resampled: str
    instruments: tuple[tuple[str, str], ...]
    metric: str


@dataclass(frozen=True)
class Headline:
    """A number the report lists among a chapter's headline numbers: its results-file name, what it is, its unit,
    and in one line what it means for the reader."""

    name: str
    label: str
    unit: str
    meaning: str


def no_tests(params: Any) -> list[VerdictTest]:
    """For chapters whose results feed no verdict test."""
    return []


@dataclass(frozen=True)
class ChapterSpec:
    """A chapter's declaration. `section`/`params`: its part of the params file (None: it has none); `reads`: other
    chapters' sections it also runs with (the robustness chapter reruns the decision tasks' sizes); `computing`: the
    llmaudit packages whose code decides what its forward passes compute (part of every cache key);
    `verdict_tests(params)`: the tests its results feed, for a run with these params (None: every test it can feed);
    `headlines`: the few results the report shows as its headline numbers (all of them stay in results.csv and
    results.json)."""

    key: str
    title: str
    computing: tuple[str, ...]
    section: str | None = None
    params: type[Section] | None = None
    reads: tuple[str, ...] = ()
    verdict_tests: Callable[[Any], list[VerdictTest]] = field(default=no_tests)
    headlines: tuple[Headline, ...] = ()


def result(subject: str, quantity: str) -> str:
    """A results-file name: the subject (a vector, task or probe set) and the quantity, e.g. 'credit.competence'."""
    return f"{subject}.{quantity}"
