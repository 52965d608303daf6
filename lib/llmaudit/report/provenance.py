"""Per-chapter provenance: the settings each chapter's rows of results.csv came from (the model, seed and token
budget, and every params section the chapter reads) and the saved steering vectors it read (by sha256), saved as
provenance/<chapter>.json beside its rows. A run stages it with its rows and commits it with them, so that the model
card can say, per chapter, which params its numbers came from and where they differ from the params file of the
latest run or from the vectors saved since: a report never mixes provenance silently."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from llmaudit.atomic import write_atomic
from llmaudit.errors import DataError
from llmaudit.reading import read_json
from llmaudit.registry import KEYS
from llmaudit.registry import chapter as chapter_spec

if TYPE_CHECKING:  # config sits above the report in the layering; a run's params are passed in
    from llmaudit.config import Params

FOLDER = "provenance"
VECTORS = "vectors"  # reports/<model>/vectors/<name>.safetensors: the steering chapter's saved vectors
RUN = ("model", "seed", "batch_tokens")  # the run settings every chapter's numbers depend on
_FIX = "delete it and rerun its chapter (its forward passes are cached)"


def sections(chapter: str) -> list[str]:
    """The params sections a chapter runs with: its own and those it also reads."""
    spec = chapter_spec(chapter)
    return [name for name in (spec.section, *spec.reads) if name]


def settings(params: Params, chapter: str) -> dict[str, Any]:
    """The settings a chapter's numbers depend on under `params`, as JSON values."""
    run = params.model_dump(mode="json", include=set(RUN))
    return {**run, **{name: getattr(params, name).model_dump(mode="json") for name in sections(chapter)}}


def digest(values: dict[str, Any]) -> str:
    """sha256 of the settings' canonical JSON: equal settings, equal digest."""
    return hashlib.sha256(json.dumps(values, sort_keys=True).encode()).hexdigest()


def provenance_path(report_dir: Path, chapter: str, pending: bool = False) -> Path:
    """reports/<model>/provenance/<chapter>.json (with `pending`: the running chapter's, until it succeeds)."""
    return Path(report_dir) / FOLDER / f"{chapter}.json{'.pending' if pending else ''}"


def stage_provenance(report_dir: Path, chapter: str, values: dict[str, Any]) -> Path:
    """Write a starting chapter's settings to its pending file; `commit_provenance` moves them in beside its rows."""
    document = {"settings": values, "sha256": digest(values)}
    return write_atomic(provenance_path(report_dir, chapter, pending=True), json.dumps(document, indent=2) + "\n")


def note_vector(report_dir: Path, chapter: str, name: str) -> None:
    """Add a saved vector the running chapter read, by its file's sha256, to its staged settings (none staged: a
    chapter object made outside a run, nothing to note)."""
    pending = provenance_path(report_dir, chapter, pending=True)
    if not pending.exists():
        return
    document = read_json(pending, _FIX)
    document.setdefault("vectors", {})[name] = vector_sha256(report_dir, name)
    write_atomic(pending, json.dumps(document, indent=2) + "\n")


def vector_sha256(report_dir: Path, name: str) -> str | None:
    """sha256 of a saved vector's file, None where there is none."""
    path = Path(report_dir) / VECTORS / f"{name}.safetensors"
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None


def commit_provenance(report_dir: Path, chapter: str) -> None:
    """After a chapter's run has succeeded (its rows just committed), its staged settings replace its previous
    ones; a run that staged none leaves them as they are."""
    pending = provenance_path(report_dir, chapter, pending=True)
    if pending.exists():
        os.replace(pending, provenance_path(report_dir, chapter))


def read_provenance(report_dir: Path) -> dict[str, dict[str, Any]]:
    """The committed settings per chapter (file name order), each {"settings", "sha256", "vectors"}; a damaged file
    (one whose digest does not match its settings, or whose vectors are not name -> sha256) or one named after no
    chapter is a one-line DataError."""
    folder = Path(report_dir) / FOLDER
    found = {}
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        if path.stem not in KEYS:
            raise DataError(f"{path} names no chapter of this version: delete it")
        document = read_json(path, _FIX)
        if not (isinstance(document, dict) and isinstance(document.get("settings"), dict)
                and document.get("sha256") == digest(document["settings"])):
            raise DataError(f"{path} is damaged (its settings do not match their sha256): {_FIX}")
        vectors = document.get("vectors", {})
        if not (isinstance(vectors, dict) and all(isinstance(v, (str, type(None))) for v in vectors.values())):
            raise DataError(f"{path} is damaged (its vectors are not names with a sha256): {_FIX}")
        found[path.stem] = {"settings": document["settings"], "sha256": document["sha256"], "vectors": vectors}
    return found


def _flat(values: Any, prefix: str = "") -> dict[str, Any]:
    """Nested settings as dotted keys ('tasks.sizes.credit') to leaf values."""
    if not isinstance(values, dict):
        return {prefix: values}
    flat: dict[str, Any] = {}
    for key, value in values.items():
        flat |= _flat(value, f"{prefix}.{key}" if prefix else str(key))
    return flat


def differences(recorded: dict[str, Any], current: dict[str, Any], report_dir: Path) -> list[str]:
    """Each setting whose value in a chapter's provenance (`recorded`, from `read_provenance`) differs from the
    current one (the latest params file's, `current`), as 'key: value (params file: other value)'; then each vector
    it read that has been saved again since, as 'vectors.name: sha256 (saved now: sha256)'."""
    old, new = _flat(recorded["settings"]), _flat(current)
    missing = object()
    found = [f"{key}: {json.dumps(old.get(key))} (params file: {json.dumps(new.get(key))})"
             for key in sorted(old.keys() | new.keys()) if old.get(key, missing) != new.get(key, missing)]
    for name, sha in recorded["vectors"].items():
        now = vector_sha256(report_dir, name)
        if now != sha:
            found.append(f"vectors.{name}: {(sha or 'none')[:12]} (saved now: {(now or 'none')[:12]})")
    return found
