"""One model's headline numbers as reports/<model>/results.csv, written atomically on each record under a lock;
a running chapter's rows wait in a side file and replace its previous rows only once the chapter has succeeded."""

from __future__ import annotations

import csv
import fcntl
import io
import math
import numbers
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pandas as pd

from llmaudit.atomic import open_lock, write_atomic
from llmaudit.errors import DataError
from llmaudit.reading import read_text

COLUMNS = ["chapter", "name", "value", "lo", "hi", "unit", "note", "n", "meaning", "flag"]
EARLIER = (COLUMNS[:7], COLUMNS[:8])  # files written before `n`, then before `meaning` and `flag`, were recorded
FLAGS = {True: "true", False: "false"}  # a yes/no result, in its own column: never a value
LIMIT = 8 * 2**20  # bytes of a results file: 400 times the ci profile's 215 rows; reading one costs ~25x its size
Value = float | int | str

_INT = re.compile(r"[+-]?\d+")
_FLOAT = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?|[+-]?(nan|inf)")


def _to_text(value: object) -> str:
    """Format a value for the CSV: integers exactly, floats by shortest round-trip repr (NaN, no value: empty),
    strings as-is (any object: callers pass numpy scalars, and anything else is refused at run time)."""
    if isinstance(value, (bool, np.bool_)):
        raise TypeError("a result value must be a number or a string, not a bool: record a yes/no result as a flag")
    if value is None:
        return ""
    if isinstance(value, numbers.Integral):
        return str(int(value))
    if isinstance(value, numbers.Real):
        return "" if math.isnan(value) else repr(float(value))
    if isinstance(value, str):
        return value
    raise TypeError(f"a result value must be a number or a string, got {type(value).__name__}")


def _parse(text: str) -> Value:
    """Read a CSV cell back: int or float where the text is a number, NaN where it is empty (no value), else the
    string."""
    if not text:
        return math.nan
    if _INT.fullmatch(text):
        return int(text)
    if _FLOAT.fullmatch(text):
        return float(text)
    return text


def _bound(text: str) -> float | None:
    """Read a confidence bound: a float, or None where empty."""
    return float(text) if text else None


def _pending_path(path: Path, chapter: str) -> Path:
    """The side file holding a running chapter's rows until `Results.commit` moves them into the results file."""
    return path.with_name(f".{path.name}.{chapter}.pending")


def _read(path: Path) -> dict[tuple[str, str], dict[str, str]]:
    """One file's rows (absent = none), keyed by (chapter, name), in file order; a file written before a column was
    recorded (`EARLIER`) reads as if that column were empty. A damaged file, or one past LIMIT (which would exhaust
    memory), is a one-line DataError naming it."""
    fix = "delete it and rerun the audit's chapters (their forward passes are cached)"
    try:
        reader = csv.DictReader(io.StringIO(read_text(path, fix, LIMIT), newline=""))
        if reader.fieldnames not in (COLUMNS, *EARLIER):
            raise DataError(f"{path}: expected columns {','.join(COLUMNS)}, got {reader.fieldnames}: {fix}")
        rows = list(reader)
    except FileNotFoundError:
        return {}
    except csv.Error as err:
        raise DataError(f"{path} is unreadable ({' '.join(str(err).split())}): {fix}") from None
    for number, row in enumerate(rows, 1):
        if None in row or None in row.values():
            raise DataError(f"{path}: row {number} does not have the header's {len(reader.fieldnames)} fields: {fix}")
        problem = _bad_numbers(row)
        if problem:
            raise DataError(f"{path}: row {number} ({row['chapter']} {row['name']}): {problem}: {fix}")
    return {(r["chapter"], r["name"]): {**dict.fromkeys(COLUMNS, ""), **r} for r in rows}


def _bad_numbers(row: dict[str, str]) -> str:
    """What is wrong with a row's numbers as read ('' when nothing): bounds empty or finite, n empty or a positive
    integer, a numeric value finite (a nan bound would drop the test from the verdicts, an inf value poison them)."""
    for column in ("lo", "hi"):
        text = row[column]
        if text and not (_FLOAT.fullmatch(text) and math.isfinite(float(text))):
            return f"{column} {text!r} is not a finite number"
    n = row.get("n", "")
    if n and not (_INT.fullmatch(n) and int(n) >= 1):
        return f"n {n!r} is not a positive integer"
    if row.get("flag", "") not in ("", *FLAGS.values()):
        return f"flag {row['flag']!r} is not one of {', '.join(FLAGS.values())}"
    value = _parse(row["value"])
    if isinstance(value, float) and math.isinf(value):
        return f"value {row['value']!r} is infinite"
    return ""


def _write(path: Path, rows: dict[tuple[str, str], dict[str, str]]) -> None:
    """Replace a file atomically (`write_atomic`)."""
    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows.values())
    write_atomic(path, text.getvalue())


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on the results file's sibling .lock file, so that the read-modify-write cycles of
    concurrent writers (processes, chapters) run one at a time and none loses another's rows."""
    with open_lock(path.with_name(f".{path.name}.lock")) as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


class Results:
    """The results file of one model's audit: one row per (chapter, name), upserted in place.

    With `staged` (a chapter's name, as a chapter run opens it), that chapter's rows are read from and written to its
    side file while one exists, and replace the chapter's rows in the results file only at `commit`: a run that
    fails or is killed leaves the file's rows as they were."""

    def __init__(self, path: str | Path, staged: str | None = None) -> None:
        self.path = Path(path)
        self.staged = staged
        self._rows = self._load()

    def _load(self) -> dict[tuple[str, str], dict[str, str]]:
        """The rows as this writer sees them: the file's, with the staged chapter's replaced by its side file's."""
        rows = _read(self.path)
        pending = None if self.staged is None else _pending_path(self.path, self.staged)
        if pending is None or not pending.exists():
            return rows
        return {key: row for key, row in rows.items() if key[0] != self.staged} | _read(pending)

    def _file(self, chapter: str) -> Path:
        """Where a chapter's rows are written: its side file when it is the staged chapter, else the results file."""
        return _pending_path(self.path, chapter) if chapter == self.staged else self.path

    def record(
        self,
        chapter: str,
        name: str,
        value: Value | bool | None,
        lo: float | None = None,
        hi: float | None = None,
        unit: str = "",
        note: str = "",
        n: int | None = None,
        meaning: str = "",
    ) -> None:
        """Insert or replace the row (chapter, name) and write the file (the staged chapter's: its side file) under the
        lock; rows other writers added meanwhile are kept. A yes/no result (a bool) goes to the `flag` column, its
        value left empty; a missing value (None, NaN) needs a `note` saying why; `n` is the number of sampled units
        behind the interval (what the verdict page's power figure scales); `meaning`: what the result means, in one
        line."""
        if not chapter or not name:
            raise ValueError("a result needs a non-empty chapter and name")
        given: tuple[object, ...] = (lo, hi, n)  # as passed: numpy scalars, or anything, at run time
        for bound in given[:2]:
            if bound is not None and (isinstance(bound, bool) or not isinstance(bound, numbers.Real)):
                raise TypeError(f"lo/hi must be numbers or None, got {bound!r}")
            if bound is not None and not math.isfinite(bound):
                raise ValueError(f"lo/hi must be finite (None where there is no interval), got {bound!r}")
        if given[2] is not None and (isinstance(given[2], bool) or not isinstance(given[2], numbers.Integral)):
            raise TypeError(f"n must be an integer or None, got {n!r}")
        if n is not None and n < 1:
            raise ValueError(f"n counts the sampled units behind the interval: at least 1, got {n}")
        flag = FLAGS.get(bool(value), "") if isinstance(value, (bool, np.bool_)) else ""
        if not flag and not _to_text(value) and not note.strip():
            raise ValueError(f"result {chapter}.{name} has no value and no note: say in the note why it is missing")
        row = {
            "chapter": chapter,
            "name": name,
            "value": "" if flag else _to_text(value),
            "lo": _to_text(lo),
            "hi": _to_text(hi),
            "unit": unit,
            "note": note,
            "n": _to_text(n),
            "meaning": meaning,
            "flag": flag,
        }
        with _locked(self.path):
            target = self._file(chapter)
            _write(target, {**_read(target), (chapter, name): row})
            self._rows = self._load()

    def clear(self, chapter: str) -> None:
        """Remove a chapter's rows as this writer sees them: from the results file, or, for the staged chapter, from
        its side file (a new run starts with none, while the file keeps the previous run's rows until `commit`)."""
        with _locked(self.path):
            target = self._file(chapter)
            _write(target, {key: row for key, row in _read(target).items() if key[0] != chapter})
            self._rows = self._load()

    def commit(self, chapter: str) -> None:
        """Replace a chapter's rows in the results file by those of its side file, once the chapter's run has
        succeeded: the file then keeps no row that the chapter's current code no longer records. Without a side file
        (the chapter was not run staged) nothing changes."""
        pending = _pending_path(self.path, chapter)
        with _locked(self.path):
            if pending.exists():
                kept = {key: row for key, row in _read(self.path).items() if key[0] != chapter}
                _write(self.path, kept | _read(pending))
                pending.unlink()
            self._rows = self._load()

    def table(self, chapter: str | None = None) -> pd.DataFrame:
        """All rows (or one chapter's); values parsed back to numbers where they are numbers (NaN where empty),
        bounds as floats, n as a nullable integer, flags as True/False (None where the row has none)."""
        rows = [
            {**r, "value": _parse(r["value"]), "lo": _bound(r["lo"]), "hi": _bound(r["hi"]), "n": _bound(r["n"]),
             "flag": {text: flag for flag, text in FLAGS.items()}.get(r["flag"])}
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
