"""Versions of what each chapter asked the model, for results.json, as lm-evaluation-harness's results carry a
version per task. A version is a hash of the code that builds a task's prompts and reads its answers (`cache.code`:
syntax trees without docstrings, so a comment or a reworded docstring keeps the version): two audits whose versions
of a task agree asked its questions the same way, and a changed template shows as a changed version. Hand-numbered
versions would need every edit to remember a bump; a hash cannot forget."""

from __future__ import annotations

import hashlib
from pathlib import Path

from llmaudit.cache import PACKAGE, code
from llmaudit.registry import CHAPTERS

DIGITS = 12  # hex digits of a version: enough to tell two versions of one module apart


def _version(paths: list[Path], settings: str = "") -> str:
    """One hash over the modules' code, each named by its path under the package, and a task's own `settings`."""
    h = hashlib.sha256(settings.encode())
    for path in paths:
        h.update(path.relative_to(PACKAGE).as_posix().encode() + b"\0" + code(path))
    return h.hexdigest()[:DIGITS]


def _folder(chapter: str) -> Path:
    """The chapter's package folder."""
    return PACKAGE / "chapters" / chapter


def task_versions() -> dict[str, dict[str, object]]:
    """Per chapter: its version (all its modules), the version of each of its modules (the templates, prompt
    builders and readers of answers, figures too), and per decision task the version of the module that builds its
    prompts, the base it builds on and its own settings, as its chapter's spec declares them
    (`ChapterSpec.versioned`)."""
    found: dict[str, dict[str, object]] = {}
    for spec in CHAPTERS:
        folder = _folder(spec.key)
        modules = sorted(folder.rglob("*.py"))
        found[spec.key] = {"version": _version(modules),
                           "modules": {p.relative_to(folder).with_suffix("").as_posix(): _version([p])
                                       for p in modules}}
        if spec.versioned is not None:
            found[spec.key]["tasks"] = {name: _version(list(paths), settings)
                                        for name, (paths, settings) in spec.versioned().items()}
    return found
