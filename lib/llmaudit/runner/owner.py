"""One report folder, one model: the folder keeps the source of the model whose audit it holds (`RECORD`, written by
the first run that holds the folder), and every run checks it before writing anything there, so that a second model
whose name makes the same folder (two local folders of one name, the hub ids a/b and a__b) cannot replace the first
one's params, vectors or cache. A folder from before the record was kept is adopted by its next run."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from llmaudit.atomic import write_atomic
from llmaudit.errors import ConfigError, DataError
from llmaudit.models.loading.spec import ModelSpec
from llmaudit.reading import read_json
from llmaudit.terminal import clipped

RECORD = "model_source.json"  # in a report folder: {"model": the source of the model audited there}
LIMIT = 2**16  # bytes of the record: a path of a few kilobytes at most


def source_of(spec: ModelSpec) -> dict[str, Any]:
    """What names the model a params' `model` section loads: a local folder by its absolute path with links
    resolved, a hub id (served locally or by NDIF alike), a packaged GGUF by its file, a joined one by its sha256, an
    endpoint's model on the chat route without a tokenizer by its server and name there."""
    if spec.path:
        return {"path": os.path.realpath(spec.path)}
    if spec.hf:
        return {"hf": spec.hf}
    if spec.embedded:
        return {"embedded": spec.embedded}
    if spec.embedded_parts:
        return {"embedded_parts": spec.sha256}
    return {"endpoint": spec.endpoint, "served": spec.served}


def check_owner(report_dir: Path, source: dict[str, Any], how: str) -> bool:
    """Whether `report_dir` records `source` as its model (False where it records none); a folder recording
    another model is a one-line ConfigError ending with `how` (how to audit this model elsewhere)."""
    path = Path(report_dir) / RECORD
    fix = "delete it: the next audit run in that folder records its model"
    try:
        recorded = read_json(path, fix, LIMIT)
    except FileNotFoundError:
        return False
    if not isinstance(recorded, dict) or not isinstance(recorded.get("model"), dict) or not recorded["model"]:
        raise DataError(f"{clipped(path)} does not name a model ({{\"model\": {{...}}}}): {fix}")
    if recorded["model"] != source:
        raise ConfigError(f"report folder {clipped(report_dir)} belongs to another model ({_named(recorded['model'])}"
                          f"), not {_named(source)}, and is left as it is: {how} (or, if it is that model moved, "
                          f"delete {RECORD} there)")
    return True


def claim(report_dir: Path, source: dict[str, Any], how: str) -> None:
    """Check `report_dir`'s model (`check_owner`) and record `source` where it records none; called by the run
    that holds the folder, so that two runs cannot both find it unrecorded."""
    if not check_owner(report_dir, source, how):
        write_atomic(Path(report_dir) / RECORD, json.dumps({"model": source}, indent=2) + "\n")


def _named(source: dict[Any, Any]) -> str:
    """A source as an error line shows it: 'path /models/a', 'hf org/name'."""
    return ", ".join(f"{clipped(key, 40)} {clipped(value)}" for key, value in list(source.items())[:3])
