"""The package is layered: each part imports only parts below it, so a chapter package never pulls in the report or
the audit runner, and the report never pulls in the params loader at run time. Each part is imported alone in a
fresh interpreter and every llmaudit module that import loads must come from its own part or a lower layer."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from llmaudit.registry import PACKAGES

PACKAGE = Path(__file__).resolve().parents[1] / "lib" / "llmaudit"
# Bottom to top. Parts on one layer must not import each other.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("errors",),  # the package's own __init__ loads it, so it sits below everything
    ("atomic", "reading", "terminal"),  # file writes and reads, terminal text, which the ledger and cache use
    ("paths", "sections", "stats", "cache", "records", "ledger", "findings"),
    ("spec",),
    ("data",),
    ("models",),
    ("steering",),
    ("tasks",),
    tuple(sorted(set(PACKAGES.values()) - {"steering", "tasks"})) + ("plots",),  # the other chapter packages
    ("registry",),
    ("verdict",),
    ("config",),
    ("captions",),  # how numbered captions read, for the report and the book's Sphinx extension
    ("report",),
    ("chapter",),
    ("audit", "book", "bookcaptions", "bookreader", "contents"),
    ("cli",),
    ("__main__",),
)
LEVEL = {part: level for level, parts in enumerate(LAYERS) for part in parts}


def parts() -> list[str]:
    """Every module and package directly under llmaudit/."""
    found = {p.stem for p in PACKAGE.glob("*.py") if p.stem != "__init__"}
    return sorted(found | {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()})


def test_every_part_has_a_layer() -> None:
    assert sorted(LEVEL) == parts()


@pytest.mark.parametrize("part", [p for p in parts() if p != "__main__"])
def test_part_imports_only_lower_layers(part: str) -> None:
    script = (f"import sys, llmaudit.{part}\n"
              "print('\\n'.join(m for m in sys.modules if m.startswith('llmaudit.')))")
    loaded = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout.split()
    above = sorted({m.split(".")[1] for m in loaded} - {part} - {p for p in LEVEL if LEVEL[p] < LEVEL[part]})
    assert not above, f"llmaudit.{part} imports {above}, which are not below it"


@pytest.mark.parametrize("module", sorted((PACKAGE / "verdict").glob("*.py")), ids=lambda p: p.stem)
def test_verdict_imports_no_chapter_package(module: Path) -> None:
    """The verdict reads the chapters' tests and gates through the registry: none of its modules names a chapter
    package (which would make the verdict, not the chapter, the place a chapter's gates are declared)."""
    tree = ast.parse(module.read_text())
    named = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}
    named |= {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    chapters = {f"llmaudit.{package}" for package in PACKAGES.values()}
    assert not {name for name in named if ".".join(name.split(".")[:2]) in chapters}
