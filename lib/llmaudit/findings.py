"""What a chapter's computation hands back to its notebook: the table it shows, the results it records and the case
records behind them, so that a cell shows, records and saves in three short calls."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import pandas as pd


@dataclass(frozen=True)
class Findings:
    """A computed comparison: `table` (what the chapter shows), `results` (indexed by results-file name, with a
    `value` column and any of lo, hi, note, n: for `Chapter.record_table`), `estimates` (what its figure plots) and
    `cases` (its case records, for `Chapter.cases`)."""

    table: pd.DataFrame
    results: pd.DataFrame
    estimates: pd.DataFrame = field(default_factory=pd.DataFrame)
    cases: list[pd.DataFrame] = field(default_factory=list)


def results_frame(rows: Sequence[Mapping[str, object]]) -> pd.DataFrame:
    """Results rows ({"name": ..., "value": ..., ...}) as the frame `Chapter.record_table` takes, in their order, each
    value as given (an integer stays an integer)."""
    return pd.DataFrame(rows, columns=None if rows else ["name", "value"], dtype=object).set_index("name")
