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
    ("report",),
    ("chapter",),
    ("audit", "book", "bookreader", "contents"),
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


def model_imports(module: Path) -> set[str]:
    """The models/ modules one models/ module imports, under TYPE_CHECKING too (`from llmaudit.models import x`
    counts as importing module x)."""
    modules = {p.stem for p in (PACKAGE / "models").glob("*.py")}
    found = set()
    for node in ast.walk(ast.parse(module.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module == "llmaudit.models":
            found |= {alias.name for alias in node.names} & modules
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("llmaudit.models."):
            found.add(node.module.split(".")[2])
        elif isinstance(node, ast.Import):
            found |= {a.name.split(".")[2] for a in node.names if a.name.startswith("llmaudit.models.")}
    return found


def test_models_modules_import_no_cycle() -> None:
    """The models/ modules form no import cycle, not even through type-only imports: the engines take a
    `models.handle.Handle`, not the `AuditModel` that runs them."""
    graph = {p.stem: model_imports(p) - {p.stem} for p in (PACKAGE / "models").glob("*.py") if p.stem != "__init__"}
    done: set[str] = set()

    def visit(module: str, path: tuple[str, ...]) -> None:
        assert module not in path, f"import cycle: {' -> '.join([*path, module])}"
        if module not in done:
            for imported in sorted(graph.get(module, ())):
                visit(imported, (*path, module))
            done.add(module)

    for module in sorted(graph):
        visit(module, ())
    assert not [m for m in ("prefix", "sampling", "sweep", "derivative", "swept_prefix") if "runtime" in graph[m]]
