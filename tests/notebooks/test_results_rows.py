"""After nbval re-executed the chapters (make test), each chapter's rows agree with the reference results file row by
row: the same rows, text and integers exactly, real numbers within their quantity's tolerance (tests/tolerance.py).
nbval runs the notebooks without committing their rows, so each chapter's rows are read from its staged side file."""

from __future__ import annotations

from pathlib import Path

import pytest

from llmaudit.registry import KEYS, notebook
from tolerance import read_rows, results_differences

HERE = Path(__file__).resolve().parent
STAGED = HERE.parent.parent / "reports" / "nbval"


@pytest.mark.parametrize("chapter", KEYS)
def test_rows_agree_with_reference(request, chapter: str) -> None:
    if not request.config.getoption("nbval", default=False):
        pytest.skip("compares the rows of the chapters nbval re-executes: run with --nbval (make test)")
    if not any(getattr(item, "path", Path()).stem == notebook(chapter) for item in request.session.items):
        pytest.skip(f"{notebook(chapter)}.ipynb was not collected in this session")
    staged = STAGED / f".results.csv.{chapter}.pending"
    assert staged.is_file(), f"{chapter} staged no rows: its notebook did not run to the end"
    reference = {key: row for key, row in read_rows(HERE / "results.csv").items() if key[0] == chapter}
    differences = results_differences(read_rows(staged), reference)
    assert not differences, "\n".join(differences)
