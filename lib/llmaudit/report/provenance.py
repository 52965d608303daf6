"""Per-chapter provenance: the settings each chapter's rows of results.csv came from (the model, seed and token
budget, and every params section the chapter reads), saved as provenance/<chapter>.json beside its rows. A run
stages it with its rows and commits it with them, so that the model card can say, per chapter, which params its
numbers came from and where they differ from the params file of the latest run: a report never mixes provenance
silently."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from llmaudit.atomic import write_atomic
from llmaudit.errors import DataError
from llmaudit.reading import read_text
from llmaudit.registry import chapter as chapter_spec

if TYPE_CHECKING:  # config sits above the report in the layering; a run's params are passed in
    from llmaudit.config import Params

FOLDER = "provenance"
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


def commit_provenance(report_dir: Path, chapter: str) -> None:
    """After a chapter's run has succeeded (its rows just committed), its staged settings replace its previous
    ones; a run that staged none leaves them as they are."""
    pending = provenance_path(report_dir, chapter, pending=True)
    if pending.exists():
        os.replace(pending, provenance_path(report_dir, chapter))


def read_provenance(report_dir: Path) -> dict[str, dict[str, Any]]:
    """The committed settings per chapter (file name order), each {"settings", "sha256"}; a damaged file, or one
    whose digest does not match its settings, is a one-line DataError."""
    folder = Path(report_dir) / FOLDER
    found = {}
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            document = json.loads(read_text(path, _FIX))
        except ValueError as err:
            raise DataError(f"{path} is damaged ({' '.join(str(err).split())}): {_FIX}") from None
        if not (isinstance(document, dict) and isinstance(document.get("settings"), dict)
                and document.get("sha256") == digest(document["settings"])):
            raise DataError(f"{path} is damaged (its settings do not match their sha256): {_FIX}")
        found[path.stem] = {"settings": document["settings"], "sha256": document["sha256"]}
    return found


def _flat(values: Any, prefix: str = "") -> dict[str, Any]:
    """Nested settings as dotted keys ('tasks.sizes.credit') to leaf values."""
    if not isinstance(values, dict):
        return {prefix: values}
    flat: dict[str, Any] = {}
    for key, value in values.items():
        flat |= _flat(value, f"{prefix}.{key}" if prefix else str(key))
    return flat


def differences(recorded: dict[str, Any], current: dict[str, Any]) -> list[str]:
    """Each setting whose recorded value (a chapter's rows) differs from the current one (the latest params file),
    as 'key: value (params file: other value)'."""
    old, new = _flat(recorded), _flat(current)
    missing = object()
    return [f"{key}: {json.dumps(old.get(key))} (params file: {json.dumps(new.get(key))})"
            for key in sorted(old.keys() | new.keys()) if old.get(key, missing) != new.get(key, missing)]
