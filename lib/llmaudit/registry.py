"""The audit's chapters in book order: one registration line each. The audit's chapter list, the params file's
sections, the cache's code hash, the verdict page's tests and gates and the book's contents are all read from here."""

from __future__ import annotations

from dataclasses import replace
from types import ModuleType
from typing import Any

from llmaudit.errors import AuditError
from llmaudit.framing import spec as framing
from llmaudit.markedness import spec as markedness
from llmaudit.robustness import spec as robustness
from llmaudit.similarity import spec as similarity
from llmaudit.spec import ChapterSpec, Gate, VerdictTest
from llmaudit.steering import spec as steering
from llmaudit.tasks import spec as tasks
from llmaudit.validity import spec as validity

# Each chapter package's `spec` module, in book order: a new chapter is one more entry here.
MODULES: tuple[ModuleType, ...] = (steering, tasks, robustness, validity, framing, similarity, markedness)
CHAPTERS: tuple[ChapterSpec, ...] = tuple(module.CHAPTER for module in MODULES)
KEYS: tuple[str, ...] = tuple(spec.key for spec in CHAPTERS)
PACKAGES: dict[str, str] = {spec.key: module.__name__.split(".")[1] for spec, module in zip(CHAPTERS, MODULES)}


def chapter(key: str) -> ChapterSpec:
    """The declaration of a chapter key; an unknown key is a one-line AuditError listing the known ones."""
    for spec in CHAPTERS:
        if spec.key == key:
            return spec
    raise AuditError(f"unknown chapter '{key}': known chapters are {', '.join(KEYS)}")


def notebook(key: str) -> str:
    """A chapter's notebook stem: its place in the book and its key, e.g. '02_decision_tasks'."""
    return f"{KEYS.index(chapter(key).key) + 1:02d}_{key}"


def gates() -> tuple[Gate, ...]:
    """Every chapter's instrument gates, in book order, each with the key of the chapter that declares it."""
    return tuple(replace(gate, chapter=spec.key) for spec in CHAPTERS for gate in spec.gates)


def computing_packages() -> tuple[str, ...]:
    """Every package whose code some chapter's forward passes depend on (the cache's code hash)."""
    return tuple(sorted({package for spec in CHAPTERS for package in spec.computing}))


def verdict_tests(params: Any = None) -> list[VerdictTest]:
    """The verdict tests of the chapters a run with `params` lists, for its settings (None: every test any run can
    feed), in book order."""
    chosen = [spec for spec in CHAPTERS if params is None or spec.key in params.chapters]
    return [test for spec in chosen for test in spec.verdict_tests(params)]
