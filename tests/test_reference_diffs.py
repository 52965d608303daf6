"""The worked diffs of the book's Reference part (book/reference/extending.md) stay true to the code: each hunk applies
to the file it names as the code is now (the lines it keeps and removes stand there together, in order) and is not
applied yet (the lines it adds are not there in its place), so a reader who makes the change makes a real one."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PAGE = REPO / "book" / "reference" / "extending.md"
BLOCK = re.compile(r"```diff\n(.*?)```", re.S)


@dataclass
class Hunk:
    """One run of a diff between '@@' lines: the file, its lines before the change and after it."""

    file: str
    before: list[str] = field(default_factory=list)
    after: list[str] = field(default_factory=list)


def hunks(page: str) -> list[Hunk]:
    """Every hunk of every diff block on the page."""
    found: list[Hunk] = []
    for block in BLOCK.findall(page):
        for line in block.splitlines():
            if line.startswith("--- a/"):
                found.append(Hunk(line.removeprefix("--- a/")))
            elif line.startswith("@@"):
                found.append(Hunk(found[-1].file))
            elif line.startswith("+++") or not found:
                continue
            else:
                kind, text = line[:1], line[1:]
                if kind in " -":
                    found[-1].before.append(text)
                if kind in " +":
                    found[-1].after.append(text)
    return found


def contains(lines: list[str], run: list[str]) -> bool:
    """Whether `run` stands in `lines` as consecutive lines."""
    return any(lines[i:i + len(run)] == run for i in range(len(lines) - len(run) + 1))


def test_the_page_has_its_worked_diffs() -> None:
    files = {hunk.file for hunk in hunks(PAGE.read_text(encoding="utf-8"))}
    assert {"lib/llmaudit/chapters/decision_tasks/__init__.py", "lib/llmaudit/registry.py",
            "lib/llmaudit/models/loading/architectures.py", "tests/test_conformance.py"} <= files


@pytest.mark.parametrize("hunk", hunks(PAGE.read_text(encoding="utf-8")), ids=lambda hunk: hunk.file)
def test_every_hunk_applies_and_is_not_applied_yet(hunk: Hunk) -> None:
    lines = (REPO / hunk.file).read_text(encoding="utf-8").splitlines()
    assert hunk.before != hunk.after
    assert contains(lines, hunk.before), f"{hunk.file}: the diff's context is not in the file as it stands"
    assert not contains(lines, hunk.after), f"{hunk.file}: the diff is applied already"


def test_the_pages_python_runs_on_a_model(tiny_model) -> None:
    """The page's code blocks (how a chapter asks the model) run as written: a scored pass and a sampling through the
    one entry point, the answers decoded one per text."""
    texts = [tiny_model.chat("who is the doctor"), tiny_model.chat("write one sentence about a nurse")]
    blocks = re.findall(r"```python\n(.*?)```", PAGE.read_text(encoding="utf-8"), re.S)
    assert blocks
    for block in blocks:
        names = {"model": tiny_model, "texts": texts, "ids": [5, 6]}
        exec(block, names)  # the page's own example, run as a reader would
        assert names["probs"].shape == (2, 2) and len(names["answers"]) == 2
