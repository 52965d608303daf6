"""Case-level evidence: the items behind each verdict test, one JSON Lines file per chapter in
reports/<model>/cases/<chapter>.jsonl, so that a reader can see which cases moved a score and two audits can be
compared unit by unit (report/comparison.py).

Format: UTF-8, one JSON object per line, one line per evaluated item (a prompt, or a prompt at one lambda):

- `test`: the results-file name of the verdict test the item's unit contributes to ("credit.blackbox_explicit",
  "credit.whitebox_slope", "credit.gender_id.slope").
- `unit`: the unit the test's bootstrap resamples, as a string: the case id for decision tasks (a seed or a
  profile id for other chapters).
- `value`: the unit's contribution to the test's score (its per-case gap, its per-case slope); the score is the
  mean of `value` over the test's units. Every item of a unit carries the same value; null where the unit does not
  enter the score (e.g. a case with a prompt of only one group).
- `group`: the protected group the prompt shows (black-box tests), else null.
- `lam`: the steering coefficient the prompt ran at (white-box tests), else null.
- `prompt_sha`: the first 16 hex digits of the sha256 of the exact prompt text (UTF-8), null without a prompt.
- `prompt`: the exact prompt text the model read (chat template and answer prefix included), or null.
- `metric`: the task's metric on this item; `mass`: the probability the model put on the answer words at all.

Further fields a chapter adds are kept. A chapter's file is replaced whole, atomically. A chapter run writes its
records to cases/<chapter>.jsonl.pending and the file takes their place only when the run succeeds, as the
chapter's rows of results.csv do: a failed or killed run leaves case file and results as they were."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from llmaudit.atomic import write_atomic
from llmaudit.errors import AuditError, DataError
from llmaudit.paths import PLAIN_NAME
from llmaudit.reading import json_lines
from llmaudit.records import FIELDS, NUMBERS, TEXT, empty_records, prompt_sha
from llmaudit.terminal import printable

FOLDER = "cases"
_FIX = "delete it and rerun the chapter (its forward passes are cached)"
DIFFERENCES = ["test", "unit", "value", "side_a", "side_b", "metric_a", "metric_b", "diff", "prompt_a", "prompt_b",
               "n_a", "n_b", "mass_a", "mass_b"]


def cases_path(report_dir: Path, chapter: str) -> Path:
    """reports/<model>/cases/<chapter>.jsonl; a chapter name that is not a plain file name is a one-line error."""
    if not isinstance(chapter, str) or not PLAIN_NAME.fullmatch(chapter):
        raise AuditError(f"case file name {chapter!r}: use a chapter key (letters, digits and ._-, not starting "
                         "with a dot)")
    return Path(report_dir) / FOLDER / f"{chapter}.jsonl"


def _missing(value: Any) -> bool:
    """None, NaN, pd.NA or NaT: written as null."""
    if value is None:
        return True
    try:
        return bool(pd.isna(value))
    except (TypeError, ValueError):  # a list or dict of an extra field
        return False


def _text(value: Any) -> str | None:
    return None if _missing(value) else str(value)


def _number(value: Any) -> float | None:
    if _missing(value):
        return None
    if isinstance(value, (bool, np.bool_, str, bytes)):
        raise TypeError("not a number")
    return float(value)


def _records(records: pd.DataFrame, where: str) -> list[dict[str, Any]]:
    """The frame's rows as JSON-ready dicts in the documented field order (extra columns after), checked."""
    extra = [c for c in records.columns if c not in FIELDS]
    rows = []
    for number, row in enumerate(records.to_dict("records"), 1):
        out: dict[str, Any] = {}
        for name in FIELDS:
            out[name] = _text(row[name]) if name in TEXT else None
        try:
            for name in NUMBERS:
                out[name] = _number(row[name])
        except (TypeError, ValueError):
            raise AuditError(f"{where}: record {number} has a non-numeric value, lam, metric or mass") from None
        if out["test"] is None or out["unit"] is None:
            raise AuditError(f"{where}: record {number} has no test or no unit: every record needs both")
        if any(not math.isfinite(out[name]) for name in NUMBERS if out[name] is not None):
            raise AuditError(f"{where}: record {number} has an infinite number: keep values finite or null")
        if out["prompt"] is not None:
            sha = prompt_sha(out["prompt"])
            if out["prompt_sha"] is None:
                out["prompt_sha"] = sha
            elif out["prompt_sha"] != sha:
                raise AuditError(f"{where}: record {number}'s prompt_sha is not the sha256 of its prompt: "
                                 "leave it empty to have it computed")
        for name in extra:
            value = row[name]
            out[name] = None if _missing(value) else value.item() if isinstance(value, np.generic) else value
        rows.append(out)
    return rows


def pending_path(report_dir: Path, chapter: str) -> Path:
    """Where a running chapter's records wait for its success: cases/<chapter>.jsonl.pending."""
    path = cases_path(report_dir, chapter)
    return path.with_name(path.name + ".pending")


def write_cases(report_dir: Path, chapter: str, records: pd.DataFrame, staged: bool = False) -> Path:
    """Write a chapter's case records (columns `FIELDS`, any order, extra columns kept) to
    reports/<model>/cases/<chapter>.jsonl (with `staged`: to its pending file, see `commit_cases`), replacing the
    previous file atomically; returns the path written."""
    path = pending_path(report_dir, chapter) if staged else cases_path(report_dir, chapter)
    missing = [name for name in FIELDS if name not in records.columns]
    if missing:
        raise AuditError(f"case records for {chapter} lack column(s) {', '.join(missing)}: give every record "
                         f"{', '.join(FIELDS)}")
    rows = _records(records, f"case records for {chapter}")
    try:
        lines = "".join(json.dumps(row, ensure_ascii=False, allow_nan=False) + "\n" for row in rows)
    except (TypeError, ValueError) as err:
        raise AuditError(f"case records for {chapter}: an extra column is not JSON ({err})") from None
    return write_atomic(path, lines)


def commit_cases(report_dir: Path, chapter: str) -> None:
    """After a chapter's run has succeeded, its pending records replace its case file (a run that wrote none, e.g.
    of an older chapter version, leaves the file as it is)."""
    pending = pending_path(report_dir, chapter)
    if pending.exists():
        os.replace(pending, cases_path(report_dir, chapter))


def discard_pending_cases(report_dir: Path, chapter: str) -> None:
    """A new run of a chapter starts without the pending records of an earlier run that failed."""
    pending_path(report_dir, chapter).unlink(missing_ok=True)


def _finite(value: Any) -> bool:
    """A JSON number that is a finite float (an integer too large for a float is not)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def _bad_record(row: dict[str, Any]) -> str:
    """What is wrong with one record as read ('' when nothing): every field present, test and unit text, the other
    text fields text or null, the numbers finite or null (an inf value, as 1e400 reads, would poison a score)."""
    missing = [name for name in FIELDS if name not in row]
    if missing:
        return f"lacks {', '.join(missing)}"
    for name in TEXT:
        if not (isinstance(row[name], str) or (row[name] is None and name not in ("test", "unit"))):
            return f"field {name} holds a value that is not text: {printable(repr(row[name])[:40])}"
    for name in NUMBERS:
        value = row[name]
        if value is not None and not _finite(value):
            shown = printable(repr(value)[:40])
            return f"field {name} holds a value that is neither a finite number nor null: {shown}"
    return ""


def _read_file(path: Path) -> pd.DataFrame:
    """One case file as a frame (columns FIELDS, then extra fields); damage is a one-line DataError."""
    rows = []
    for number, row in json_lines(path, _FIX):
        if not isinstance(row, dict):
            raise DataError(f"{path}: line {number} is not a JSON object: {_FIX}")
        problem = _bad_record(row)
        if problem:
            raise DataError(f"{path}: line {number} {problem}: {_FIX}")
        rows.append(row)
    if not rows:
        return empty_records()
    frame = pd.DataFrame(rows)
    extra = [c for c in frame.columns if c not in FIELDS]
    frame = frame[[*FIELDS, *extra]]
    for name in NUMBERS:
        column = frame[name].astype(object)
        frame[name] = column.where(column.notna(), np.nan).astype(float)
    for name in TEXT:
        frame[name] = frame[name].astype(object).where(frame[name].notna(), None)
    frame["test"], frame["unit"] = frame["test"].map(str), frame["unit"].map(str)
    return frame


def read_cases(report_dir: Path, chapter: str | None = None) -> pd.DataFrame:
    """Case records of one chapter, or of every chapter (None) in file-name order, with a first column `chapter`
    (the file's name); no case files at all reads as an empty frame, a named chapter without a file is an
    AuditError."""
    if chapter is not None:
        path = cases_path(report_dir, chapter)
        if not path.is_file():
            raise AuditError(f"no case file {path}: run the {chapter} chapter with this version, which writes it")
        paths = [path]
    else:
        folder = Path(report_dir) / FOLDER
        paths = sorted(p for p in folder.glob("*.jsonl") if p.is_file()) if folder.is_dir() else []
    frames = [_read_file(path).assign(chapter=path.stem) for path in paths]
    if not frames:
        return empty_records().assign(chapter=pd.Series(dtype=object))[["chapter", *FIELDS]]
    frame = pd.concat(frames, ignore_index=True)
    return frame[["chapter", *[c for c in frame.columns if c != "chapter"]]]


def unit_values(cases: pd.DataFrame) -> pd.DataFrame:
    """One row per test and unit (columns test, unit, value), in order of appearance: the values whose mean is the
    test's score. Units with a null value are left out; a unit whose items disagree on its value is an
    AuditError."""
    known = cases.dropna(subset=["value"])
    grouped = known.groupby(["test", "unit"], sort=False)["value"]
    table = grouped.agg(["first", "min", "max"]).reset_index()
    split = table[table["min"] != table["max"]]
    if not split.empty:
        first = split.iloc[0]
        raise AuditError(f"case records of test {first['test']}, unit {first['unit']} disagree on its value "
                         f"({first['min']!r} vs {first['max']!r}): rewrite the chapter's case file")
    return table.rename(columns={"first": "value"})[["test", "unit", "value"]].reset_index(drop=True)


def _side(rows: pd.DataFrame) -> pd.DataFrame:
    """Per unit: mean metric, first prompt, item count and mean answer mass of one side of a pair."""
    return rows.groupby("unit", sort=False).agg(metric=("metric", "mean"), prompt=("prompt", "first"),
                                                n=("metric", "size"), mass=("mass", "mean"))


def _pairing(rows: pd.DataFrame, values: pd.Series) -> tuple[str, pd.DataFrame, str, pd.DataFrame] | None:
    """The two sides a test's score contrasts: the two groups (oriented so that side a minus side b has the sign of
    the unit values) for black-box tests, the largest and smallest lambda for white-box ones; None otherwise."""
    if rows["lam"].notna().all() and rows["lam"].nunique() >= 2:
        low, high = rows["lam"].min(), rows["lam"].max()
        return f"λ = {high:g}", rows[rows["lam"] == high], f"λ = {low:g}", rows[rows["lam"] == low]
    groups = sorted(rows["group"].dropna().unique())
    if len(groups) != 2 or rows["group"].isna().any():
        return None
    first, second = groups
    means = rows.pivot_table(index="unit", columns="group", values="metric")
    diff = (means[first] - means[second]).reindex(values.index)
    known = diff.notna() & values.notna()
    if known.any() and np.allclose(-diff[known], values[known], rtol=0, atol=1e-9) and not np.allclose(
            diff[known], values[known], rtol=0, atol=1e-9):
        first, second = second, first
    return first, rows[rows["group"] == first], second, rows[rows["group"] == second]


def largest_differences(cases: pd.DataFrame, test: str, k: int = 3) -> pd.DataFrame:
    """The `k` units of `test` whose two sides differ most (columns `DIFFERENCES`): for a black-box test its two
    groups (side a is group A of the gap, e.g. female or Black), for a white-box test the largest and the smallest
    lambda of the grid; per side the mean metric, the first prompt, the number of items and the mean answer mass
    (the probability the model put on the answer words at all), and `diff` = metric_a - metric_b. A test without such
    a pairing ranks its units by |value| (sides, metric_b, prompt_b and mass_b empty)."""
    rows = cases[cases["test"] == test]
    if rows.empty:
        raise AuditError(f"no case records of test {test!r}: check the test's results-file name")
    values = unit_values(rows).set_index("unit")["value"]
    pairing = _pairing(rows, values)
    if pairing is None:
        side = _side(rows)
        table = pd.DataFrame({"unit": side.index, "metric_a": side["metric"].to_numpy(),
                              "prompt_a": side["prompt"].to_numpy(), "n_a": side["n"].to_numpy(),
                              "mass_a": side["mass"].to_numpy()})
        table = table.assign(value=table["unit"].map(values), side_a=None, side_b=None, metric_b=np.nan,
                             prompt_b=None, n_b=0, mass_b=np.nan)
        table["diff"] = table["value"]
    else:
        label_a, rows_a, label_b, rows_b = pairing
        table = _side(rows_a).add_suffix("_a").join(_side(rows_b).add_suffix("_b"), how="inner").reset_index()
        table = table.assign(value=table["unit"].map(values), side_a=label_a, side_b=label_b,
                             diff=table["metric_a"] - table["metric_b"])
    table = table.dropna(subset=["diff"]).assign(test=test)
    order = table.assign(size=table["diff"].abs()).sort_values("unit", kind="stable")
    order = order.sort_values("size", ascending=False, kind="stable")
    return order[DIFFERENCES].head(k).reset_index(drop=True)
