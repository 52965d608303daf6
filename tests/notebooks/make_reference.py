"""Regenerate the nbval reference notebooks: every chapter executed on params/ci.yaml, from no cached passes but sharing
them between chapters as an audit does (as `make test` runs them: tests/conftest.py), with the outputs nbval does not
compare (SVG charts, stderr progress, papermill timings) stripped to keep them small.
Run `make nbval-reference` after changing a chapter or anything that changes its numbers; name chapters to
regenerate only those (after the steering chapter's reference exists: later chapters read its vectors)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import nbformat
import pandas as pd

from llmaudit.paths import REPO
from llmaudit.registry import KEYS, notebook
from llmaudit.runner.audit import execute_chapter

HERE = Path(__file__).resolve().parent
REPORT = Path("reports/nbval")
RESULTS = HERE / "results.csv"  # the ci audit's results file, read by tests/test_registry.py
SKIPPED = ("image/svg+xml", "text/html")


def strip(path: Path) -> None:
    """Drop uncompared outputs and run-specific metadata from an executed notebook."""
    nb = nbformat.read(path, as_version=4)
    nb.metadata.pop("papermill", None)
    for cell in nb.cells:
        cell.metadata.pop("papermill", None)
        cell.metadata.pop("execution", None)
        if cell.cell_type != "code":
            continue
        cell.outputs = [out for out in cell.outputs if not (out.output_type == "stream" and out.name == "stderr")]
        for out in cell.outputs:
            for mime in SKIPPED:
                out.get("data", {}).pop(mime, None)
    nbformat.write(nb, path)


def main(chapters: list[str], into: Path = HERE, report: Path = REPORT) -> None:
    """Execute the named chapters (all when none) into `into`, their report folder being `report`."""
    if not chapters:  # a whole regeneration starts from an empty report folder, as an audit of a new model does
        shutil.rmtree(REPO / report, ignore_errors=True)
    shutil.rmtree(REPO / report / "cache", ignore_errors=True)
    for chapter, stem in ((key, notebook(key)) for key in KEYS):
        if chapters and chapter not in chapters:
            continue
        output = into / f"{stem}.ipynb"
        execute_chapter(chapter, "ci", report, output)
        strip(output)
        print(output)
    ran = pd.read_csv(REPO / report / RESULTS.name, dtype=str, keep_default_na=False)
    if chapters:  # the other chapters' rows as the reference holds them (the report folder's may be older)
        kept = pd.read_csv(into / RESULTS.name, dtype=str, keep_default_na=False)
        ran = pd.concat([kept[~kept["chapter"].isin(chapters)], ran[ran["chapter"].isin(chapters)]])
        ran = ran.sort_values("chapter", key=lambda c: c.map(KEYS.index), kind="stable")
    ran.to_csv(into / RESULTS.name, index=False)
    print(into / RESULTS.name)


if __name__ == "__main__":
    main(sys.argv[1:])
