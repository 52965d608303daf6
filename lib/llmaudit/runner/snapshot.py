"""The params text an audit runs: read once at its start (`config.read_params_file`), copied into the report folder
for every chapter to read, and compared with the file at the end, so that an edit during the run can neither mix two
texts among the chapters nor put a text that did not run on the model card."""

from __future__ import annotations

import hashlib
from pathlib import Path

import yaml

from llmaudit.atomic import write_atomic
from llmaudit.config import ParamsFile
from llmaudit.terminal import printable

FOLDER = "params"  # reports/<model>/params/<file name>: the text the latest audit's chapters ran


def snapshot(run: ParamsFile, report_dir: Path) -> Path:
    """Write the run's params text into the report folder under its file's name; the chapters read this copy."""
    return write_atomic(Path(report_dir) / FOLDER / run.path.name, anchored(run))


def anchored(run: ParamsFile) -> str:
    """The run's text, or where it gives `model.path` or `data_dir` as a relative path (taken from the params file's
    folder), the same settings with those two as the absolute paths the run resolved: the copy lies in another folder
    and must mean what the file meant."""
    raw = yaml.safe_load(run.text)
    model = raw.get("model")
    relative = {key for key, value in (("path", (model or {}).get("path")), ("data_dir", raw.get("data_dir")))
                if isinstance(value, str) and not Path(value).expanduser().is_absolute()}
    if not relative:
        return run.text
    if "path" in relative:
        model["path"] = run.params.model.path
    if "data_dir" in relative:
        raw["data_dir"] = run.params.data_dir
    return (f"# {run.path.name} as this audit read it, its relative paths taken from {run.path.parent}\n"
            + yaml.safe_dump(raw, sort_keys=False))


def edited_note(run: ParamsFile) -> str | None:
    """One note where the params file no longer holds the text the run read at its start (edited, removed or
    unreadable now); None where it does. The file is hashed, never parsed: a half-written file is only different."""
    try:
        now = hashlib.sha256(run.path.read_bytes()).hexdigest()
    except OSError as err:
        now = f"unreadable ({err.strerror or err})"
    if now == run.sha256:
        return None
    shown = now[:12] if len(now) == len(run.sha256) else now
    return (f"note: params file {printable(str(run.path))} changed during this audit (sha256 {run.sha256[:12]} at "
            f"its start, {printable(shown)} now): every chapter ran the text read at the start, which the model card "
            "and report keep; audit again to run the edited file")
