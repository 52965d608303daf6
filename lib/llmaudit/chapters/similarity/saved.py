"""The similarity chapter's systems as saved in a report folder (answers.csv, representations.safetensors), written
and read without torch, so the cross-model index reads them without loading any model code."""

from __future__ import annotations

import io
import json
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
from safetensors import SafetensorError, safe_open
from safetensors.numpy import load_file, save

from llmaudit.atomic import write_atomic
from llmaudit.errors import AuditError
from llmaudit.reading import parse_json, read_text

FOLDER = "similarity"
QUESTION = ["category", "example_id", "question_index", "polarity", "context_condition", "label", "unknown_index",
            "target_index"]
STEREOSET = ("id", "bias_type", "system", "choice")
UNQOVER = ("dimension", "template", "subject_a", "subject_b", "attribute", "order", "negated", "system", "s_a", "s_b")


def save_systems(report_dir: Path, answers: pd.DataFrame, reps: Mapping[str, np.ndarray],
                 stereoset: pd.DataFrame | None = None, represented: pd.DataFrame | None = None,
                 unqover: pd.DataFrame | None = None) -> None:
    """Write answers.csv, representations.safetensors (any array-likes, e.g. CPU tensors, whose rows are the
    questions `represented`, None: the answers' questions in order) and, given StereoSet or UnQover answers,
    stereoset.csv and unqover.csv (the columns UnQover's measures read) under the report's similarity folder, each
    atomically."""
    folder = Path(report_dir) / FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    write_atomic(folder / "answers.csv", answers.to_csv(index=False))
    if stereoset is not None:
        write_atomic(folder / "stereoset.csv", stereoset.to_csv(index=False))
    if unqover is not None:
        write_atomic(folder / "unqover.csv", unqover[list(UNQOVER)].to_csv(index=False))
    rows = answers.drop_duplicates(["category", "example_id"]) if represented is None else represented
    order = rows[["category", "example_id"]].to_dict("list")
    arrays = {key: np.ascontiguousarray(np.asarray(value)) for key, value in reps.items()}
    write_atomic(folder / "representations.safetensors", save(arrays, metadata={"order": json.dumps(order)}))


def load_systems(
    reports: Path, models: list[str] | None = None
) -> tuple[pd.DataFrame, dict[str, tuple[pd.DataFrame, np.ndarray]]]:
    """The systems saved under `reports` by the listed report folders (all when None): all answers, and per
    'system|depth' its question order (category, example_id) with the representations in that order. A damaged
    file is a one-line AuditError naming it and the chapter that writes it again."""
    folders = sorted(Path(reports).glob(f"*/{FOLDER}")) if models is None else [
        Path(reports) / model / FOLDER for model in models]
    answers: list[pd.DataFrame] = []
    reps: dict[str, tuple[pd.DataFrame, np.ndarray]] = {}
    for folder in folders:
        if not (folder / "answers.csv").exists():
            if models is not None:
                raise AuditError(f"no similarity results in {folder.parent}: run its audit's similarity chapter first")
            continue
        answers.append(_read_answers(folder / "answers.csv"))
        order, tensors = _read_representations(folder / "representations.safetensors")
        reps |= {key: (order, tensor) for key, tensor in tensors.items()}
    return (pd.concat(answers, ignore_index=True) if answers else pd.DataFrame()), reps


def load_stereoset_answers(reports: Path, models: list[str]) -> pd.DataFrame:
    """The StereoSet answers saved by the listed report folders; a folder audited before StereoSet joined the chapter
    has none and adds no rows."""
    paths = [Path(reports) / model / FOLDER / "stereoset.csv" for model in models]
    found = [_read_answers(path, STEREOSET) for path in paths if path.exists()]
    return pd.concat(found, ignore_index=True) if found else pd.DataFrame(columns=list(STEREOSET))


def load_unqover_answers(reports: Path, models: list[str]) -> pd.DataFrame:
    """The UnQover answers saved by the listed report folders; a folder audited before UnQover joined the chapter has
    none and adds no rows."""
    paths = [Path(reports) / model / FOLDER / "unqover.csv" for model in models]
    found = [_read_answers(path, UNQOVER) for path in paths if path.exists()]
    return pd.concat(found, ignore_index=True) if found else pd.DataFrame(columns=list(UNQOVER))


def _read_answers(path: Path, columns: Sequence[str] = (*QUESTION, "system", "pred")) -> pd.DataFrame:
    """A saved answers file, checked for the columns the comparisons read."""
    text = read_text(path, f"rerun the similarity chapter of {path.parent.parent.name}")  # a regular file, UTF-8
    try:
        answers = pd.read_csv(io.StringIO(text))
    except ValueError as err:  # not CSV, empty
        raise _damaged(path, " ".join(str(err).split())) from None
    missing = [column for column in columns if column not in answers]
    if missing:
        raise _damaged(path, f"no column {', '.join(missing)}")
    return answers


def _read_representations(path: Path) -> tuple[pd.DataFrame, dict[str, np.ndarray]]:
    """A saved representations.safetensors: the question order of its rows, and its tensors by 'system|depth'."""
    if path.exists() and not path.is_file():  # a FIFO or a device would block the reader
        raise _damaged(path, "not a regular file")
    try:
        with safe_open(str(path), framework="numpy") as handle:
            order = pd.DataFrame(parse_json((handle.metadata() or {})["order"], str(path),
                                           f"rerun the similarity chapter of {path.parent.parent.name}"))
        return order, load_file(str(path))
    except (OSError, ValueError, KeyError, SafetensorError) as err:  # KeyError: no question order
        raise _damaged(path, f"{type(err).__name__}: {' '.join(str(err).split())}") from None


def _damaged(path: Path, problem: str) -> AuditError:
    """The one-line error for a damaged file of a report's similarity folder."""
    return AuditError(f"similarity results {path} are damaged ({problem}): rerun the similarity chapter of "
                      f"{path.parent.parent.name}")
