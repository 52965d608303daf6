"""The report's anchor ids, one function per kind of target, so every link and the element it points to are built
by the same function (a verdict row, a requirement, a case group, a heading)."""

from __future__ import annotations

import re


def slug(text: str) -> str:
    """Lower-case letters and digits joined by hyphens ('judicial_penalty: the rate' -> 'judicial-penalty-the-rate')."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "x"


def test_id(name: str) -> str:
    """A verdict test's row on the verdict page, by its results-file name."""
    return f"v-{slug(name)}"


def requirement_id(requirement: str) -> str:
    """A requirement's block on the verdict page, by its whole text: one task has several requirements (its
    invariance to the protected concept, its dependence on the task-relevant one)."""
    return f"req-{slug(requirement)}"


def cases_id(name: str) -> str:
    """A verdict test's case group in "Cases behind the gaps"."""
    return f"cases-{slug(name)}"


def unique(base: str, taken: set[str]) -> str:
    """`base`, or `base-2`, `base-3` ... where it is taken; the result is added to `taken`."""
    found, n = base, 2
    while found in taken:
        found, n = f"{base}-{n}", n + 1
    taken.add(found)
    return found
