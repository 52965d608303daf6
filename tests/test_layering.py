"""The package is layered: each part imports only parts below it, so a chapter package never pulls in the report or
the audit runner, and the report never pulls in the params loader at run time. Each part is imported alone in a
fresh interpreter and every llmaudit module that import loads must come from its own part or a lower layer."""

from __future__ import annotations

import ast
import graphlib
import subprocess
import sys
from pathlib import Path

import pytest

from llmaudit.registry import KEYS

PACKAGE = Path(__file__).resolve().parents[1] / "lib" / "llmaudit"
GROUPS = ("chapters", "runner")  # packages that only group parts: each of their modules and packages is a part
CHAPTERS = tuple(f"chapters.{key}" for key in KEYS)
# Bottom to top. Parts on one layer must not import each other.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("errors",),  # the package's own __init__ loads it, so it sits below everything
    # file writes and reads, terminal text, number formats, stored tensors, how far two runs may differ, settings
    # handed to the kernels through the environment
    ("atomic", "reading", "terminal", "formats", "sealed", "tolerance", "capabilities", "environment", "units"),
    ("footnotes",),  # why a table's number is missing, as every table prints it
    ("paths", "sections", "stats", "cache", "records", "ledger", "findings", "chapters.summaries", "chapters.greyed",
     "chapters.display"),
    ("spec",),
    ("data",),
    ("models",),
    ("chapters.steering_vectors",),
    ("chapters.decision_tasks",),
    tuple(sorted(set(CHAPTERS) - {"chapters.steering_vectors", "chapters.decision_tasks"})),  # the other chapters
    ("registry",),
    ("verdict",),
    ("config",),
    ("captions",),  # how numbered captions read, for the report and the book's Sphinx extension
    ("report",),
    ("runner.chapter", "runner.snapshot", "runner.owner"),
    ("runner.needs",),
    ("runner.audit", "runner.book", "runner.bookcaptions", "runner.bookreader", "runner.contents"),
    ("runner.adhoc", "runner.agreement", "runner.bookreports", "runner.plan"),
    ("cli",),
    ("__main__",),
)
LEVEL = {part: level for level, parts in enumerate(LAYERS) for part in parts}


def part_of(module: str) -> str:
    """The part a loaded module (e.g. 'llmaudit.chapters.framing.spec') belongs to: 'chapters.framing'."""
    names = module.split(".")[1:]
    return ".".join(names[:2]) if names[0] in GROUPS and len(names) > 1 else names[0]


def parts() -> list[str]:
    """Every module and package directly under llmaudit/ and under its grouping packages."""
    found = set()
    for prefix, folder in [("", PACKAGE)] + [(f"{group}.", PACKAGE / group) for group in GROUPS]:
        found |= {prefix + p.stem for p in folder.glob("*.py") if p.stem != "__init__"}
        found |= {prefix + p.name for p in folder.iterdir() if (p / "__init__.py").is_file()}
    return sorted(found - set(GROUPS))


def test_every_part_has_a_layer() -> None:
    assert sorted(LEVEL) == parts()


@pytest.mark.parametrize("group", GROUPS)
def test_grouping_packages_import_nothing(group: str) -> None:
    """Importing one chapter or runner module never loads its neighbours through the package's __init__."""
    tree = ast.parse((PACKAGE / group / "__init__.py").read_text())
    assert not [node for node in ast.walk(tree) if isinstance(node, ast.Import | ast.ImportFrom)]


def run_at_import(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    """The import statements a module runs when it is imported: outside functions and `if TYPE_CHECKING:` blocks."""
    found: list[ast.Import | ast.ImportFrom] = []
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            continue
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            found += [n for child in node.orelse for n in run_at_import(ast.Module(body=[child], type_ignores=[]))]
            continue
        found += [node] if isinstance(node, ast.Import | ast.ImportFrom) else run_at_import(node)
    return found


def loaded_by(module: str) -> set[str]:
    """The llmaudit modules `import module` loads, read from the sources (no interpreter started): each module's
    packages, and what every loaded module imports at import time, transitively."""
    paths = {module_of(path): path for path in PACKAGE.rglob("*.py")}
    loaded, todo = set(), [module]
    while todo:
        name = todo.pop()
        if name in loaded or name not in paths:
            continue
        loaded.add(name)
        todo += [".".join(name.split(".")[:i]) for i in range(1, name.count(".") + 1)]  # its packages
        for node in run_at_import(ast.parse(paths[name].read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                todo += [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
            elif isinstance(node, ast.Import):
                todo += [alias.name for alias in node.names]
    return loaded


@pytest.mark.parametrize("part", [p for p in parts() if p != "__main__"])
def test_part_imports_only_lower_layers(part: str) -> None:
    loaded = loaded_by(f"llmaudit.{part}")
    above = sorted({part_of(m) for m in loaded if m != "llmaudit"} - set(GROUPS) - {part}
                   - {p for p in LEVEL if LEVEL[p] < LEVEL[part]})
    assert not above, f"llmaudit.{part} imports {above}, which are not below it"


def test_the_sources_read_the_imports_an_interpreter_runs() -> None:
    """`loaded_by` against one interpreter's import of a part high in the layers (its loads are a subset)."""
    script = "import sys, llmaudit.runner.audit\nprint('\\n'.join(m for m in sys.modules if m.startswith('llmaudit')))"
    ran = set(subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout.split())
    assert ran <= loaded_by("llmaudit.runner.audit") and len(ran) > 50


@pytest.mark.parametrize("module", sorted((PACKAGE / "verdict").glob("*.py")), ids=lambda p: p.stem)
def test_verdict_imports_no_chapter_package(module: Path) -> None:
    """The verdict reads the chapters' tests and gates through the registry: none of its modules names a chapter
    package (which would make the verdict, not the chapter, the place a chapter's gates are declared)."""
    tree = ast.parse(module.read_text())
    named = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}
    named |= {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    assert not {name for name in named if name.startswith("llmaudit.chapters")}


def imported(module: Path) -> set[str]:
    """The modules one module names in its imports, under TYPE_CHECKING and inside functions too ('from llmaudit
    import chapters' names llmaudit.chapters)."""
    found = set()
    for node in ast.walk(ast.parse(module.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            found |= {node.module} | {f"{node.module}.{alias.name}" for alias in node.names}
        elif isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
    return found


GENERIC = sorted(p for p in PACKAGE.rglob("*.py") if "chapters" not in p.relative_to(PACKAGE).parts[:-1]
                 and p.relative_to(PACKAGE) != Path("registry.py"))


@pytest.mark.parametrize("module", GENERIC, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_generic_module_imports_a_chapter_package(module: Path) -> None:
    """Only the registry names the chapters' packages: a chapter's steps in the generic parts (the similarity index
    figure and preflight, the stand-in's settings, the tokenizer check of --model) are hooks its `ChapterSpec`
    declares, so a new chapter is its package, its notebook and one registry line."""
    named = {name for name in imported(module) if name == "llmaudit.chapters" or name.startswith("llmaudit.chapters.")}
    assert not named, f"{module.name} imports {sorted(named)}: declare the step as a hook of the chapter's spec"


def module_of(path: Path) -> str:
    """A module's dotted name ('llmaudit.models.steer'; a package's __init__: the package's)."""
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> dict[str, set[str]]:
    """Per llmaudit module, the llmaudit modules it imports, under TYPE_CHECKING and inside functions too: `from p
    import n` imports module p.n where there is one, else p (a module importing its own package's submodule does
    not run the package's __init__ for it)."""
    modules = {module_of(path): path for path in PACKAGE.rglob("*.py")}
    graph = {}
    for name, path in modules.items():
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                found |= {f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in modules else node.module
                          for a in node.names}
            elif isinstance(node, ast.Import):
                found |= {alias.name for alias in node.names}
        graph[name] = (found & set(modules)) - {name}
    return graph


def test_no_import_cycle() -> None:
    """No two llmaudit modules import each other, directly or around a loop, not even through type-only imports: a
    measurement that needs another module's work takes it as data or as a narrow function passed in (the decision
    tasks' dependence tests take the runner's contrast scores and its sweep, not the runner)."""
    try:
        graphlib.TopologicalSorter(import_graph()).prepare()
    except graphlib.CycleError as err:
        pytest.fail(f"import cycle: {' -> '.join(err.args[1])}")


def test_the_engines_take_a_handle_not_the_audit_model() -> None:
    """The engines and the passes they run take the model's parts (`models.passes.handle.Handle`,
    `models.engines.base.Parts`), not the `AuditModel` that runs them: no module of theirs imports it."""
    graph = import_graph()
    parts = [name for name in graph if name.startswith(("llmaudit.models.engines", "llmaudit.models.passes",
                                                         "llmaudit.models.sampling"))]
    assert len(parts) > 20 and not [name for name in parts if "llmaudit.models.runtime" in graph[name]]
