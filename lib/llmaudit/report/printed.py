"""No chapter prints a number that was not measured: a printed line holding 'nan' (Python's text for a missing
float, e.g. '+nan' from f"{r:+.2f}") tells the reader nothing, where one sentence could say why the number is missing.
Checked on an executed chapter's printed output (stdout), which the report shows as printed; tables are not checked
here, since the report prints their missing cells as an em dash (`report.tables`)."""

from __future__ import annotations

import re

import nbformat

_NAN = re.compile(r"(?<![\w.])[+-]?(?:nan|NaN)(?![\w.])")


def printed_nans(executed: nbformat.NotebookNode) -> list[str]:
    """Each printed line of an executed chapter that holds 'nan', as 'cell N prints ...', one line each."""
    found = []
    for number, cell in enumerate(executed.cells, 1):
        for out in cell.get("outputs", []) if cell.cell_type == "code" else []:
            if out.get("output_type") == "stream" and out.get("name") == "stdout":
                found += [f"cell {number} prints {line.strip()!r}" for line in out.get("text", "").splitlines()
                          if _NAN.search(line)]
    return found
