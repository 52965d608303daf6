"""The model card of an audit: what was audited (weights and their hash), with what (params, code, library
versions, data hashes) and how long it took, so that someone else can reproduce the report."""

from __future__ import annotations

import hashlib
import json
import math
import platform
import subprocess
from datetime import datetime, timezone
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import TYPE_CHECKING, Any

import llmaudit
from llmaudit.atomic import write_atomic
from llmaudit.cache import code_version
from llmaudit.data.store import MANIFEST_PATH, load_manifest
from llmaudit.errors import DataError
from llmaudit.ledger import read_ledgers
from llmaudit.paths import REPO
from llmaudit.registry import computing_packages

if TYPE_CHECKING:  # the card reads a run's params; config itself sits above the report in the layering
    from llmaudit.config import Params

CARD = "model_card.json"
MODEL = "model.json"
FIXES = {  # how each JSON file of a report folder comes back when it is damaged
    CARD: "delete it: the next audit run writes it again (without the wall times of chapters it does not rerun)",
    MODEL: "delete it and rerun a chapter of the audit, which writes it again when it loads the model",
}
LIBRARIES = ("torch", "transformers", "nnsight", "numpy", "pandas", "scipy", "safetensors", "papermill",
             "altair", "vl-convert-python")


def _version(package: str) -> str:
    """Installed version of a distribution, or 'absent'."""
    try:
        return version(package)
    except PackageNotFoundError:
        return "absent"


def _git_commit() -> str | None:
    """The checkout's commit, with '+dirty' when tracked files differ from it; None outside a git checkout."""
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True, check=True)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO,
                               capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return None
    return head.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")


def environment() -> dict[str, Any]:
    """Code and library versions the numbers depend on."""
    return {
        "llmaudit": llmaudit.__version__,
        "code_version": code_version(computing_packages()),
        "git_commit": _git_commit(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "libraries": {name: _version(name) for name in LIBRARIES},
    }


def write_model(report_dir: Path, description: dict[str, Any]) -> None:
    """Save the loaded model's description (source, weights sha256, dtype, device), written when a chapter loads it."""
    write_atomic(Path(report_dir) / MODEL, json.dumps(description, indent=2) + "\n")


def read_json(path: Path) -> dict[str, Any]:
    """A JSON object file of the report folder, or {} where it does not exist yet; a damaged one (a model card whose
    epsilon is not a number > 0, which would fail or pass every test) is a one-line DataError naming it and how to
    get it back."""
    if not path.exists():
        return {}
    try:
        found = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:  # ValueError: not UTF-8, not JSON
        raise _damaged(path, " ".join(str(err).split())) from None
    if not isinstance(found, dict):
        raise _damaged(path, "not a JSON object")
    if path.name == CARD and isinstance(found.get("params"), dict) and "epsilon" in found["params"]:
        epsilon = found["params"]["epsilon"]
        if isinstance(epsilon, bool) or not isinstance(epsilon, (int, float)) or not 0 < epsilon < math.inf:
            raise _damaged(path, f"params.epsilon {epsilon!r} is not a number > 0")
    return found


def _damaged(path: Path, problem: str) -> DataError:
    """The one-line error for a damaged JSON file of a report folder."""
    return DataError(f"{path} is damaged ({problem}): {FIXES.get(path.name, 'delete it and rerun the audit')}")


def write_card(report_dir: Path, params: Params, params_file: Path, timings: dict[str, float]) -> Path:
    """Write model_card.json; chapter wall times of earlier runs are kept for chapters not run this time, and the
    compute ledger of each chapter is its last computing run's (`llmaudit.ledger`)."""
    report_dir = Path(report_dir)
    previous = read_json(report_dir / CARD)
    text = params_file.read_text(encoding="utf-8")
    card = {
        "model": read_json(report_dir / MODEL),
        "params": {"name": params.name, "file": params_file.name, "sha256": hashlib.sha256(text.encode()).hexdigest(),
                   "text": text, "epsilon": params.tasks.epsilon, "gates": params.gates.model_dump(),
                   "seed": params.seed},
        "environment": environment(),
        "data": {
            "manifest_sha256": hashlib.sha256(MANIFEST_PATH.read_bytes()).hexdigest(),
            "files": {key: entry["sha256"] for key, entry in load_manifest().items()},
        },
        "wall_seconds": {**previous.get("wall_seconds", {}), **{k: round(v, 1) for k, v in timings.items()}},
        "compute": read_ledgers(report_dir),
        "generated": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
    }
    return write_atomic(report_dir / CARD, json.dumps(card, indent=2) + "\n")
