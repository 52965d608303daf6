"""The worked diffs of the book's Reference part (book/reference/extending.md) stay true to the code: every line a
diff keeps or removes is a line of the file it names, so the diffs apply to the code as it is."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PAGE = REPO / "book" / "reference" / "extending.md"
BLOCK = re.compile(r"```diff\n(.*?)```", re.S)


def hunks(page: str) -> list[tuple[str, list[str]]]:
    """(file, the lines it keeps or removes) for each file of each diff block on the page."""
    found: list[tuple[str, list[str]]] = []
    for block in BLOCK.findall(page):
        for line in block.splitlines():
            if line.startswith("--- a/"):
                found.append((line.removeprefix("--- a/"), []))
            elif line.startswith(("+++", "+", "@@")) or not found:
                continue
            elif line.startswith(("-", " ")):
                found[-1][1].append(line[1:])
    return found


def test_the_page_has_its_worked_diffs() -> None:
    files = {name for name, _ in hunks(PAGE.read_text(encoding="utf-8"))}
    assert {"lib/llmaudit/chapters/decision_tasks/__init__.py", "lib/llmaudit/registry.py",
            "lib/llmaudit/models/architectures.py"} <= files


@pytest.mark.parametrize("name,lines", hunks(PAGE.read_text(encoding="utf-8")))
def test_every_kept_or_removed_line_is_in_its_file(name: str, lines: list[str]) -> None:
    source = set((REPO / name).read_text(encoding="utf-8").splitlines())
    assert [line for line in lines if line not in source] == [], name
