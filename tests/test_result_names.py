"""Renaming a result is one edit: the decision tasks' estimate names (`decision_tasks.spec.Method`) are written once,
in the enum, and every other place (the chapters' code, the notebooks' code cells) refers to its members."""

from __future__ import annotations

import ast
from pathlib import Path

import jupytext
import pytest

from llmaudit.chapters.decision_tasks.spec import Method

REPO = Path(__file__).resolve().parents[1]
SPEC = REPO / "lib" / "llmaudit" / "chapters" / "decision_tasks" / "spec.py"
SOURCES = sorted((REPO / "lib" / "llmaudit").rglob("*.py")) + sorted((REPO / "book").glob("0*.md"))


def code(path: Path) -> str:
    """A module's source, or a notebook's code cells."""
    if path.suffix == ".md":
        cells = jupytext.read(path).cells
        return "\n".join(cell.source for cell in cells if cell.cell_type == "code" and not cell.source.startswith("%"))
    return path.read_text(encoding="utf-8")


def spelled(path: Path) -> set[str]:
    """The estimate names a source spells as string constants (docstrings, which only mention them, left out)."""
    tree = ast.parse(code(path))
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.FunctionDef, ast.ClassDef)) and node.body
                  and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
    names = {str(member) for member in Method}
    return {node.value for node in ast.walk(tree) if isinstance(node, ast.Constant) and id(node) not in docstrings
            and isinstance(node.value, str) and node.value in names}


@pytest.mark.parametrize("path", SOURCES, ids=lambda path: path.relative_to(REPO).as_posix())
def test_an_estimate_name_is_spelled_only_in_its_enum(path: Path) -> None:
    assert spelled(path) == ({str(member) for member in Method} if path == SPEC else set())
