"""One model's headline numbers as reports/<model>/results.csv, written atomically on each record."""

from __future__ import annotations

import csv
import numbers
import os
import re
import tempfile
from pathlib import Path

import pandas as pd

from llmaudit.errors import DataError

COLUMNS = ["chapter", "name", "value", "lo", "hi", "unit", "note", "n"]
WITHOUT_N = COLUMNS[:-1]  # files written before `n` (the cases behind an interval) was recorded
Value = float | int | str

_INT = re.compile(r"[+-]?\d+")
_FLOAT = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?|[+-]?(nan|inf)")


def _to_text(value: Value | None) -> str:
    """Format a value for the CSV: integers exactly, floats by shortest round-trip repr, strings as-is."""
    if value is None:
        return ""
    if isinstance(value, bool):
        raise TypeError("a result value must be a number or a string, not a bool")
    if isinstance(value, numbers.Integral):
        return str(int(value))
    if isinstance(value, numbers.Real):
        return repr(float(value))
    if isinstance(value, str):
        return value
    raise TypeError(f"a result value must be a number or a string, got {type(value).__name__}")


def _parse(text: str) -> Value:
    """Read a CSV cell back: int or float where the text is a number, else the string."""
    if _INT.fullmatch(text):
        return int(text)
    if _FLOAT.fullmatch(text):
        return float(text)
    return text


def _bound(text: str) -> float | None:
    """Read a confidence bound: a float, or None where empty."""
    return float(text) if text else None


class Results:
    """The results file of one model's audit: one row per (chapter, name), upserted in place."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._rows = self._load()

    def _load(self) -> dict[tuple[str, str], dict[str, str]]:
        """Read the file (absent = empty), keyed by (chapter, name), in file order; a file without the n column
        reads as if every n were empty."""
        if not self.path.exists():
            return {}
        with self.path.open(newline="", encoding="utf-8") as f:
            reader = csv.DictReader(f)
            if reader.fieldnames not in (COLUMNS, WITHOUT_N):
                raise DataError(f"{self.path}: expected columns {','.join(COLUMNS)}, got {reader.fieldnames}")
            return {(r["chapter"], r["name"]): {"n": "", **r} for r in reader}

    def _write(self) -> None:
        """Replace the file atomically (temp file in the same folder, then rename)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=f".{self.path.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", newline="", encoding="utf-8") as f:
                writer = csv.DictWriter(f, fieldnames=COLUMNS, lineterminator="\n")
                writer.writeheader()
                writer.writerows(self._rows.values())
            os.replace(tmp, self.path)
        except BaseException:
            os.unlink(tmp)
            raise

    def record(
        self,
        chapter: str,
        name: str,
        value: Value,
        lo: float | None = None,
        hi: float | None = None,
        unit: str = "",
        note: str = "",
        n: int | None = None,
    ) -> None:
        """Insert or replace the row (chapter, name) and write the file; rows other writers added meanwhile are kept.
        `n` is the number of sampled units behind the interval (what the verdict page's power figure scales)."""
        if not chapter or not name:
            raise ValueError("a result needs a non-empty chapter and name")
        for bound in (lo, hi):
            if bound is not None and (isinstance(bound, bool) or not isinstance(bound, numbers.Real)):
                raise TypeError(f"lo/hi must be numbers or None, got {bound!r}")
        if n is not None and (isinstance(n, bool) or not isinstance(n, numbers.Integral)):
            raise TypeError(f"n must be an integer or None, got {n!r}")
        if n is not None and n < 1:
            raise ValueError(f"n counts the sampled units behind the interval: at least 1, got {n}")
        row = {
            "chapter": chapter,
            "name": name,
            "value": _to_text(value),
            "lo": _to_text(lo),
            "hi": _to_text(hi),
            "unit": unit,
            "note": note,
            "n": _to_text(n),
        }
        self._rows = self._load()
        self._rows[(chapter, name)] = row
        self._write()

    def clear(self, chapter: str) -> None:
        """Remove a chapter's rows, so a re-run of the chapter leaves no row that its current code no longer records."""
        self._rows = {key: row for key, row in self._load().items() if key[0] != chapter}
        self._write()

    def table(self, chapter: str | None = None) -> pd.DataFrame:
        """All rows (or one chapter's); values parsed back to numbers where they are numbers, bounds as floats,
        n as a nullable integer."""
        rows = [
            {**r, "value": _parse(r["value"]), "lo": _bound(r["lo"]), "hi": _bound(r["hi"]), "n": _bound(r["n"])}
            for r in self._rows.values()
            if chapter is None or r["chapter"] == chapter
        ]
        df = pd.DataFrame(rows, columns=COLUMNS)
        df["value"] = df["value"].astype(object)
        df[["lo", "hi"]] = df[["lo", "hi"]].astype(float)
        df["n"] = df["n"].astype("Int64")
        return df

    def get(self, chapter: str, name: str) -> Value:
        """The parsed value of one result; KeyError where it was never recorded."""
        try:
            return _parse(self._rows[(chapter, name)]["value"])
        except KeyError:
            raise KeyError(f"no result {name!r} in chapter {chapter!r} of {self.path}") from None
