"""The model card of an audit: what was audited (weights and their hash), with what (params, code, library
versions, data hashes) and how long it took, so that someone else can reproduce the report."""

from __future__ import annotations

import hashlib
import json
import platform
import subprocess
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

import llmaudit
from llmaudit.atomic import write_atomic
from llmaudit.cache import code_version
from llmaudit.data.store import MANIFEST_PATH, load_manifest
from llmaudit.errors import DataError
from llmaudit.ledger import read_ledgers
from llmaudit.paths import REPO
from llmaudit.reading import read_json as read_document
from llmaudit.registry import computing_packages
from llmaudit.report.provenance import differences, read_provenance, settings
from llmaudit.report.results import Results
from llmaudit.terminal import printable
from llmaudit.verdict.gates import GateParams
from llmaudit.verdict.verdicts import card_margins

if TYPE_CHECKING:  # the card reads a run's params; config itself sits above the report in the layering
    from llmaudit.config import Params, ParamsFile

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


class _Part(BaseModel):
    """A part of a model card as read back: strict types, finite numbers, fields it does not know kept."""

    model_config = ConfigDict(extra="allow", strict=True, allow_inf_nan=False)


class _CardParams(_Part):
    """The params the card records: the verdicts read the margins (epsilon per unit; older cards: one number) and
    the gates from here."""

    name: str = ""
    file: str = ""
    sha256: str = ""
    text: str = ""
    chapters: list[str] = []  # the chapters the params list (cards of older versions: none recorded)
    seed: int = 0
    epsilon: float | dict[str, float]
    gates: GateParams = Field(default_factory=GateParams)

    @field_validator("epsilon")
    @classmethod
    def _epsilon(cls, value: float | dict[str, float]) -> float | dict[str, float]:
        """Margins the params file could give: each in (0, its top) (0 would fail every test, 1e300 pass them)."""
        try:
            card_margins(value)
        except ValidationError as err:
            problem = err.errors(include_url=False)[0]
            raise ValueError(f"{'.'.join(str(p) for p in problem['loc'])} {problem['msg'].lower()}") from None
        return value


class _Totals(_Part):
    """One chapter's compute ledger totals."""

    blocks: int = Field(ge=0)
    actual: int = Field(ge=0)
    minimum: int = Field(ge=0)


class _Chapter(_Part):
    """One chapter's provenance (`chapter_provenance`)."""

    settings: dict[str, Any] | None
    sha256: str | None
    vectors: dict[str, str | None] = {}
    differs: list[str]


class _Card(_Part):
    """model_card.json as `write_card` writes it; cards of older versions lack some parts, never hold wrong ones."""

    params: _CardParams
    model: dict[str, Any] = {}
    environment: dict[str, str | None | dict[str, str]] = {}
    data: dict[str, str | dict[str, str]] = {}
    wall_seconds: dict[str, float] = {}
    compute: dict[str, _Totals] = {}
    chapters: dict[str, _Chapter] = {}
    generated: str = ""

    @field_validator("wall_seconds")
    @classmethod
    def _walls(cls, value: dict[str, float]) -> dict[str, float]:
        if any(seconds < 0 for seconds in value.values()):
            raise ValueError("a wall time is negative")
        return value


def read_json(path: Path) -> dict[str, Any]:
    """A JSON object file of the report folder (the model card, the model's description), or {} where it does not
    exist yet; one that is not a regular file, not JSON, or whose fields have the wrong type or an impossible value
    (a card epsilon of -1 would fail every test) is a one-line DataError naming it and how to get it back."""
    fix = FIXES.get(path.name, "delete it and rerun the audit")
    try:
        found = read_document(path, fix)
    except FileNotFoundError:
        return {}
    if not isinstance(found, dict):
        raise _damaged(path, "not a JSON object")
    if path.name == CARD:
        try:
            _Card.model_validate(found)
        except ValidationError as err:
            problem = err.errors(include_url=False)[0]
            where = ".".join(str(part) for part in problem["loc"])
            shown = printable(repr(problem["input"])[:40])
            raise _damaged(path, f"{where}: {problem['msg'].lower()}, got {shown}") from None
    return found


def _damaged(path: Path, problem: str) -> DataError:
    """The one-line error for a damaged JSON file of a report folder."""
    return DataError(f"{path} is damaged ({problem}): {FIXES.get(path.name, 'delete it and rerun the audit')}")


def chapter_provenance(report_dir: Path, params: Params) -> dict[str, dict[str, Any]]:
    """Per chapter with rows in the results file or saved settings: the settings its rows came from, their digest,
    the vectors it read, and where they differ from `params` (the latest run's) or from the vectors saved since;
    rows from before settings were saved say so."""
    recorded = read_provenance(report_dir)
    with_rows = Results(Path(report_dir) / "results.csv").table()["chapter"]
    found = {}
    for chapter in dict.fromkeys([*with_rows, *recorded]):
        if chapter in recorded:
            entry = recorded[chapter]
            found[chapter] = {**entry, "differs": differences(entry, settings(params, chapter), report_dir)}
        else:
            found[chapter] = {"settings": None, "sha256": None, "vectors": {},
                              "differs": [f"params not recorded (rows of an older version): rerun --chapter {chapter}"]}
    return found


def write_card(report_dir: Path, run: ParamsFile, timings: dict[str, float]) -> Path:
    """Write model_card.json; its params are the text the run read at its start (`run`), never the file as it is
    now; chapter wall times of earlier runs are kept for chapters not run this time, the compute ledger of each
    chapter is its last computing run's (`llmaudit.ledger`), and each chapter's params are the ones its rows came
    from (`chapter_provenance`)."""
    report_dir = Path(report_dir)
    previous = read_json(report_dir / CARD)
    params = run.params
    card = {
        "model": read_json(report_dir / MODEL),
        "params": {"name": params.name, "file": run.path.name, "sha256": run.sha256, "text": run.text,
                   "chapters": params.chapters, "epsilon": params.epsilon.model_dump(),
                   "gates": params.gates.model_dump(), "seed": params.seed},
        "chapters": chapter_provenance(report_dir, params),
        "environment": environment(),
        "data": {
            "manifest_sha256": hashlib.sha256(MANIFEST_PATH.read_bytes()).hexdigest(),
            "files": {key: entry["sha256"] for key, entry in load_manifest().items()},
        },
        "wall_seconds": {**previous.get("wall_seconds", {}), **{k: round(v, 1) for k, v in timings.items()}},
        "compute": read_ledgers(report_dir),
        "generated": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
    }
    return write_atomic(report_dir / CARD, json.dumps(card, indent=2) + "\n")
