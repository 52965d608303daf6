"""Case records: the rows of a chapter's case file (report/evidence.py documents the format and writes it), built
here, below every chapter package, so that each chapter turns its own per-item frame into records the same way."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import pandas as pd

FIELDS = ("test", "unit", "value", "group", "lam", "prompt_sha", "prompt", "metric", "mass")
TEXT = ("test", "unit", "group", "prompt_sha", "prompt")
NUMBERS = ("value", "lam", "metric", "mass")
SHA_CHARS = 16


def prompt_sha(text: str) -> str:
    """The first 16 hex digits of the sha256 of a prompt's UTF-8 text."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:SHA_CHARS]


def empty_records() -> pd.DataFrame:
    """A frame with the record fields and no rows."""
    return pd.DataFrame({name: pd.Series(dtype=float if name in NUMBERS else object) for name in FIELDS})


def case_records(frame: pd.DataFrame, test: str, values: pd.Series, *, unit: str = "case",
                 group: pd.Series | None = None, lam: pd.Series | None = None,
                 extra: Sequence[str] = ()) -> pd.DataFrame:
    """Records of one test: each row of `frame` (columns `unit`, metric, mass, optional prompt and the `extra`
    ones) with its unit's value from `values` (indexed by unit; null for a unit outside the score), its group and
    lambda where the test has them. The prompt's hash is added when the records are written."""
    units = frame[unit]
    records = pd.DataFrame(
        {
            "test": test,
            "unit": units.map(str).to_numpy(),
            "value": units.map(values).astype(float).to_numpy(),
            "group": [None] * len(frame) if group is None else group.astype(object).to_numpy(),
            "lam": float("nan") if lam is None else lam.astype(float).to_numpy(),
            "prompt_sha": None,
            "prompt": frame["prompt"].tolist() if "prompt" in frame else [None] * len(frame),
            "metric": frame["metric"].astype(float).to_numpy(),
            "mass": frame["mass"].astype(float).to_numpy(),
        },
        columns=list(FIELDS),
    )
    for name in extra:
        records[name] = frame[name].to_numpy()
    return records
