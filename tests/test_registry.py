"""The chapter registry is the one list the audit is built from: every chapter's notebook, params section, cache
hash and verdict tests follow from its declaration, and nothing that reads them can miss one silently."""

from __future__ import annotations

import ast
from pathlib import Path

import jupytext
import pandas as pd
import pytest

from llmaudit.cache import FIGURES, code_version
from llmaudit.config import Params, load_params
from llmaudit.paths import BOOK, REPO
from llmaudit.registry import CHAPTERS, KEYS, MODULES, computing_packages, notebook, verdict_tests
from llmaudit.runner.contents import table_of_contents
from llmaudit.verdict.verdicts import verdicts

PACKAGE = REPO / "lib" / "llmaudit"
CI_RESULTS = REPO / "tests" / "notebooks" / "results.csv"  # the ci audit's results, saved with the nbval references
# Parts that run on cached tensors or render them: never part of what a forward pass computes.
NOT_COMPUTING = {"atomic", "cache", "capabilities", "chapters.display", "chapters.summaries", "config", "environment",
                 "errors", "findings", "footnotes", "formats", "ledger",
                 "paths", "reading", "records", "registry", "report", "runner", "sealed", "sections", "spec", "stats",
                 "verdict"}
GROUPS = ("chapters",)  # packages whose parts are their subpackages and modules: 'chapters.decision_tasks'


def part(parts: list[str]) -> str:
    """The llmaudit part a module (its dotted name, split) belongs to: a top-level package or module, or one chapter
    package (or shared module) under llmaudit.chapters."""
    return ".".join(parts[1:3]) if parts[1] in GROUPS and len(parts) > 2 else parts[1]


def imported_parts(source: str, seen: set[Path] | None = None) -> set[str]:
    """The llmaudit parts that code imports, following llmaudit's own computing modules (not the runner, params,
    report or verdict modules, nor a chapter's figures, which read results rather than compute them)."""
    seen = set() if seen is None else seen
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        names = [node.module] if isinstance(node, ast.ImportFrom) and node.module else \
            [alias.name for alias in node.names] if isinstance(node, ast.Import) else []
        for name in names:
            parts = name.split(".")
            if parts[0] != "llmaudit" or len(parts) < 2:
                continue
            found.add(part(parts))
            if part(parts) in NOT_COMPUTING:
                continue
            for candidate in (PACKAGE.joinpath(*parts[1:]).with_suffix(".py"),
                              PACKAGE.joinpath(*parts[1:], "__init__.py")):
                if candidate.is_file() and candidate.name != FIGURES and candidate not in seen:
                    seen.add(candidate)
                    found |= imported_parts(candidate.read_text(encoding="utf-8"), seen)
    return found


def notebook_code(key: str) -> str:
    """The code cells of a chapter's jupytext source."""
    nb = jupytext.read(BOOK / f"{notebook(key)}.md")
    return "\n".join(cell.source for cell in nb.cells if cell.cell_type == "code")


def test_every_chapter_has_its_notebook_and_no_notebook_is_unregistered() -> None:
    assert sorted(p.stem for p in BOOK.glob("[0-9][0-9]_*.md")) == [notebook(key) for key in KEYS]


@pytest.mark.parametrize("key", KEYS)
def test_chapter_opens_itself_by_its_registered_key(key: str) -> None:
    assert f'open_chapter("{key}"' in notebook_code(key)


@pytest.mark.parametrize("key", KEYS)
def test_chapter_computing_code_is_in_its_cache_hash(key: str) -> None:
    spec = next(spec for spec in CHAPTERS if spec.key == key)
    used = imported_parts(notebook_code(key)) - NOT_COMPUTING
    assert used <= set(spec.computing), f"{key} runs code of {sorted(used - set(spec.computing))} not declared"
    assert set(spec.computing) <= set(computing_packages())


def test_cache_hash_changes_with_each_computing_package() -> None:
    everything = computing_packages()
    for package in everything:
        assert code_version(everything) != code_version(tuple(p for p in everything if p != package)), package


def test_params_has_each_declared_section() -> None:
    for spec in CHAPTERS:
        if spec.section:
            assert Params.model_fields[spec.section].annotation is spec.params


def test_table_of_contents_is_built_from_the_registry() -> None:
    assert (REPO / "_toc.yml").read_text(encoding="utf-8") == table_of_contents(), \
        "run `python -m llmaudit.runner.contents --toc-only` and commit _toc.yml"


def test_chapters_are_the_packages_named_by_their_keys() -> None:
    """Each registered chapter is declared in llmaudit/chapters/<its key>/spec.py, and every package there is one."""
    assert [module.__name__ for module in MODULES] == [f"llmaudit.chapters.{key}.spec" for key in KEYS]
    packages = {p.name for p in (PACKAGE / "chapters").iterdir() if (p / "__init__.py").is_file()}
    assert packages == set(KEYS)


def test_a_chapter_using_undeclared_code_is_caught() -> None:
    """The check above has teeth: robustness code run by a chapter that declared only its own package is caught
    using the decision tasks' and steering vectors' packages; a chapter's figures are not computing code."""
    used = imported_parts("from llmaudit.chapters.robustness.compare import black_box\n") - NOT_COMPUTING
    assert used - {"data", "models", "chapters.robustness"} == {"chapters.decision_tasks", "chapters.steering_vectors"}
    assert imported_parts("import llmaudit.chapters.markedness.plots") == {"chapters.markedness"}


def test_ci_audit_feeds_every_declared_verdict_test() -> None:
    """Run the ci audit's results file through the verdict page: a test that a chapter declares but whose result
    the chapter did not write (a renamed key, a skipped task) would silently vanish from the page."""
    params = load_params("ci")
    results = pd.read_csv(CI_RESULTS)
    table = verdicts(results, params.epsilon, params.gates)
    shown = set(zip(table["requirement"], table["test"]))
    missing = [test.name for test in verdict_tests(params) if (test.requirement, test.label) not in shown]
    assert not missing, (f"declared verdict tests missing from the ci audit's verdict page: {missing} (after adding a "
                         "task or a chapter: `make nbval-reference`, then commit tests/notebooks/)")
    assert len(table) == len(verdict_tests(params))
