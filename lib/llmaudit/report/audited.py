"""An audit's results as read once from its report folder: the rows of results.csv, the model card, the verdicts
they give, the case records and the settings each chapter's rows came from. Every writer of an audit run (the
mixed-provenance notes, results.json, the HTML report, the index) takes this value, so they all show one reading."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import pandas as pd

from llmaudit.errors import AuditError
from llmaudit.report.card import CARD, read_json
from llmaudit.report.evidence import FOLDER, read_cases
from llmaudit.report.results import Results
from llmaudit.verdict.verdicts import from_card

RESULTS = "results.csv"


@dataclass(frozen=True, kw_only=True)
class Audited:
    """One report folder's audited results: `rows` (results.csv's table, None where the folder has no results file),
    `card` (the model card, {} where none is written) and `verdicts` (the verdict page's table, empty without both).
    The case records are read on first use, once (`cases`)."""

    folder: Path
    rows: pd.DataFrame | None = field(compare=False)
    card: dict[str, Any] = field(compare=False)
    verdicts: pd.DataFrame = field(compare=False)

    @property
    def provenance(self) -> dict[str, Any]:
        """Per chapter, the settings its rows came from and where they differ from the params file (the card's)."""
        return self.card.get("chapters", {})

    @property
    def complete(self) -> bool:
        """Whether the folder holds both a model card and a results file (an audit that has finished)."""
        return bool(self.card) and self.rows is not None

    @cached_property
    def cases(self) -> dict[str, pd.DataFrame | AuditError]:
        """Per case file (cases/<chapter>.jsonl, in name order), its records, or why they cannot be read."""
        folder = self.folder / FOLDER
        found: dict[str, pd.DataFrame | AuditError] = {}
        for path in sorted(p for p in folder.glob("*.jsonl") if p.is_file()) if folder.is_dir() else []:
            try:
                found[path.name] = read_cases(self.folder, path.stem)
            except AuditError as err:
                found[path.name] = err
        return found


def read_audited(report_dir: Path) -> Audited:
    """Read a report folder's results once; a damaged results file or model card is a one-line AuditError."""
    folder = Path(report_dir)
    card = read_json(folder / CARD)
    rows = Results(folder / RESULTS).table() if (folder / RESULTS).exists() else None
    verdicts = from_card(rows, card) if card and rows is not None else pd.DataFrame()
    return Audited(folder=folder, rows=rows, card=card, verdicts=verdicts)
