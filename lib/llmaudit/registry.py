"""The audit's chapters in book order: one registration line each (and one typed field of `Sections` for a chapter
with a params section). The audit's chapter list, the params file's sections, the caches' code hashes, the verdict
page's tests and gates and the book's contents are all read from here; it is the one generic module that imports
the chapter packages."""

from __future__ import annotations

from dataclasses import replace
from types import ModuleType
from typing import Any

from pydantic import Field

from llmaudit.chapters.decision_tasks import spec as decision_tasks
from llmaudit.chapters.decision_tasks.spec import TaskParams
from llmaudit.chapters.framing import spec as framing
from llmaudit.chapters.framing.spec import FramingParams
from llmaudit.chapters.markedness import spec as markedness
from llmaudit.chapters.markedness.spec import MarkednessParams
from llmaudit.chapters.robustness import spec as robustness
from llmaudit.chapters.similarity import spec as similarity
from llmaudit.chapters.similarity.spec import SimilarityParams
from llmaudit.chapters.steering_vectors import spec as steering_vectors
from llmaudit.chapters.steering_vectors.spec import SteeringParams
from llmaudit.chapters.validity import spec as validity
from llmaudit.chapters.validity.spec import ValidityParams
from llmaudit.errors import AuditError
from llmaudit.sections import Section
from llmaudit.spec import ChapterSpec, Epsilon, Gate, VerdictTest
from llmaudit.terminal import clipped

# Each chapter's `spec` module (llmaudit/chapters/<key>/spec.py), in book order: a new chapter is one more entry here.
MODULES: tuple[ModuleType, ...] = (steering_vectors, decision_tasks, robustness, validity, framing, similarity,
                                   markedness)
CHAPTERS: tuple[ChapterSpec, ...] = tuple(module.CHAPTER for module in MODULES)
KEYS: tuple[str, ...] = tuple(spec.key for spec in CHAPTERS)


class Sections(Section):
    """The params file's chapter sections, typed, in book order: a chapter with a section (its spec's `section` and
    `params`) is one more line here, which `tests/test_registry.py` keeps equal to the declarations."""

    steering: SteeringParams = Field(default_factory=SteeringParams)
    tasks: TaskParams = Field(default_factory=TaskParams)
    validity: ValidityParams = Field(default_factory=ValidityParams)
    framing: FramingParams = Field(default_factory=FramingParams)
    similarity: SimilarityParams = Field(default_factory=SimilarityParams)
    markedness: MarkednessParams = Field(default_factory=MarkednessParams)


def chapter(key: str) -> ChapterSpec:
    """The declaration of a chapter key; an unknown key is a one-line AuditError listing the known ones."""
    for spec in CHAPTERS:
        if spec.key == key:
            return spec
    raise AuditError(f"unknown chapter '{clipped(key)}': known chapters are {', '.join(KEYS)}")


def notebook(key: str) -> str:
    """A chapter's notebook stem: its place in the book and its key, e.g. '02_decision_tasks'."""
    return f"{KEYS.index(chapter(key).key) + 1:02d}_{key}"


def gates() -> tuple[Gate, ...]:
    """Every chapter's instrument gates, in book order, each with the key of the chapter that declares it."""
    return tuple(replace(gate, chapter=spec.key) for spec in CHAPTERS for gate in spec.gates)


def computing_packages() -> tuple[str, ...]:
    """Every package whose code some chapter's forward passes depend on (the audit's code version on its card)."""
    return tuple(sorted({package for spec in CHAPTERS for package in spec.computing}))


def reused(key: str) -> tuple[str, ...]:
    """The chapters whose cached forward passes a chapter reads (its `reuses`, and theirs in turn: a chapter's cache
    holds only the passes it computed itself), in book order."""
    found = set(chapter(key).reuses)
    for other in chapter(key).reuses:
        found |= set(reused(other))
    return tuple(k for k in KEYS if k in found)


def cache_packages(key: str) -> tuple[str, ...]:
    """The packages a chapter's tensor-cache folder is named by: its computing packages, those of the chapters whose
    passes it reads (so that it reads only passes of the code it would run itself) and the model layer."""
    return tuple(sorted({"models", *chapter(key).computing, *(p for k in reused(key) for p in chapter(k).computing)}))


def verdict_tests(params: Any = None) -> list[VerdictTest]:
    """The verdict tests of the chapters a run with `params` lists, for its settings (None: every test any run can
    feed), in book order."""
    chosen = [spec for spec in CHAPTERS if params is None or spec.key in params.chapters]
    return [test for spec in chosen for test in spec.verdict_tests(params)]


def epsilons() -> tuple[Epsilon, ...]:
    """The margins the chapters' verdict tests are judged against, one per unit, in the order tests first use them."""
    return tuple({test.epsilon.key: test.epsilon for test in verdict_tests()}.values())
