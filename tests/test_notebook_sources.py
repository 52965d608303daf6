"""The nbval reference notebooks must be executions of the current chapter sources, as a local audit runs them (its
engine can do everything, so only the cells for an engine without weights are left out, `runner.needs`): a chapter
edited without `make nbval-reference` would otherwise be regression-tested against stale code."""

from __future__ import annotations

import jupytext
import nbformat
import pytest

from llmaudit.capabilities import Capability
from llmaudit.paths import REPO
from llmaudit.registry import KEYS, notebook
from llmaudit.runner.audit import chapter_source
from llmaudit.runner.needs import kept

REFERENCES = REPO / "tests" / "notebooks"


def reference_of(chapter: str) -> nbformat.NotebookNode:
    """The chapter's reference notebook; a chapter without one (new, say) fails saying how to make it."""
    reference = REFERENCES / f"{notebook(chapter)}.ipynb"
    assert reference.exists(), f"{reference} missing: run `make nbval-reference`"
    return nbformat.read(reference, as_version=4)


def code_cells(nb) -> list[str]:
    """Sources of the code cells, without the cell papermill injects."""
    return [c.source for c in nb.cells
            if c.cell_type == "code" and "injected-parameters" not in c.metadata.get("tags", [])]


@pytest.mark.parametrize("chapter", KEYS)
def test_reference_matches_source(chapter: str) -> None:
    current = code_cells(kept(jupytext.read(chapter_source(chapter)), frozenset(Capability)))
    assert code_cells(reference_of(chapter)) == current, (
        f"{notebook(chapter)}.ipynb is stale: run `make nbval-reference` and commit it"
    )


@pytest.mark.parametrize("chapter", KEYS)
def test_reference_runs_ci_params(chapter: str) -> None:
    nb = reference_of(chapter)
    injected = [c.source for c in nb.cells if "injected-parameters" in c.metadata.get("tags", [])]
    # the cache on, as make_reference.py and nbval (tests/conftest.py) run them: shared between chapters in one session
    assert len(injected) == 1 and 'params_file = "ci"' in injected[0] and "use_cache = True" in injected[0]


@pytest.mark.parametrize("chapter", KEYS)
def test_reader_sees_the_setup_code_and_the_settings_once(chapter: str) -> None:
    """Both parameters cells (the chapter's defaults and papermill's values) are hidden; the setup cell, whose
    code is shown folded, prints the params the chapter ran with."""
    nb = reference_of(chapter)
    tags = [set(c.metadata.get("tags", [])) for c in nb.cells if c.cell_type == "code"]
    assert all("remove-cell" in t for t in tags if t & {"parameters", "injected-parameters"})
    setup = next(c for c in nb.cells if c.cell_type == "code" and "open_chapter(" in c.source)
    assert "hide-input" in setup.metadata.tags and "remove-cell" not in setup.metadata.tags
    printed = "".join(out.get("text", "") for out in setup.outputs if out.get("name") == "stdout")
    assert "ci (params: ci), seed 0" in printed
