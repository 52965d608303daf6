"""What a chapter notebook needs from its two parameters: the validated params, the model (loaded once, on
first use), the data mirror, the results file, and the folders for saved vectors and cached forward passes."""

from __future__ import annotations

import textwrap
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from llmaudit.cache import TensorCache, code_version
from llmaudit.config import Params, load_params
from llmaudit.data import data_dir
from llmaudit.errors import AuditError
from llmaudit.formats import missing
from llmaudit.ledger import ledger_path
from llmaudit.models import AuditModel, load_model
from llmaudit.models.endpoint.ledger import FOLDER as REQUESTS
from llmaudit.models.endpoint.model import EndpointModel
from llmaudit.models.request import Runtime
from llmaudit.models.vector import SteeringVector
from llmaudit.paths import REPO
from llmaudit.records import empty_records
from llmaudit.registry import cache_packages, reused
from llmaudit.registry import chapter as chapter_spec
from llmaudit.report import Results
from llmaudit.report.card import write_model
from llmaudit.report.evidence import commit_cases, discard_pending_cases, write_cases
from llmaudit.report.provenance import VECTORS, commit_provenance, note_vector, sections, settings, stage_provenance
from llmaudit.spec import result
from llmaudit.units import RANGES, outside

RESULTS = "results.csv"
STEERING = "steering_vectors"  # the chapter that saves the vectors the others read
NO_VALUE = "not measured: the run had nothing to compute it from"  # a missing value's note where none says why
PRINTED = 76  # columns of a printed line that fit the book's ~650 px text column in its monospace font


@dataclass
class Chapter:
    """One chapter's run of one model's audit."""

    name: str
    params: Params
    report_dir: Path
    use_cache: bool = True
    params_file: str = ""

    @cached_property
    def model(self) -> AuditModel:
        """The audited model, loaded on first use and bound to this run's cache, token budget and lambda batch (every
        pass of the chapter runs under them); its description goes to the report folder for the model card, and its
        compute ledger to ledger/<chapter>.json after each computing call (a remote model's: its passes on NDIF)."""
        model = load_model(self.params.name, self.params.model)
        model.runtime = Runtime(cache=self.cache, batch_tokens=self.params.batch_tokens,
                                lambda_batch=self.params.tasks.lambda_batch)
        model.ledger.path = ledger_path(self.report_dir, self.name)
        if isinstance(model, EndpointModel):  # its exchanges, the cache a resumed audit reads
            model.requests.path = self.report_dir / REQUESTS / f"{self.name}.jsonl"
        write_model(self.report_dir, {**model.provenance, **model.identity, "blocks": model.n_layers,
                                      "width": model.width})
        return model

    @property
    def mirror(self) -> Path | None:
        """Local data mirror: the params' data_dir, else $LLMAUDIT_DATA, else none (download into the cache)."""
        return data_dir(self.params.data_dir)

    @cached_property
    def results(self) -> Results:
        """The model's results file (one row per headline number), this chapter's rows staged until its run succeeds."""
        return Results(self.report_dir / RESULTS, staged=self.name)

    @property
    def cache(self) -> TensorCache | None:
        """The chapter's cached forward passes (None when caching is off): a folder per
        version of the code that computes them (`registry.cache_packages`), read along with the folders of the
        chapters whose passes it repeats (`ChapterSpec.reuses`)."""
        if not self.use_cache:
            return None
        return TensorCache(self._cache_folder(self.name), tuple(map(self._cache_folder, reused(self.name))))

    def _cache_folder(self, key: str) -> Path:
        """Where chapter `key` stores its cached passes in this audit: named by the hash of its code."""
        return self.report_dir / "cache" / code_version(cache_packages(key))

    @property
    def vectors_dir(self) -> Path:
        """Folder of saved steering vectors."""
        return self.report_dir / VECTORS

    def describe(self) -> str:
        """The settings this run uses, as the params file gives them: the model, seed and token budget, then each
        params section the chapter reads, each wrapped to `PRINTED` columns (continuation lines indented) so that it
        fits the book's column. Chapters print it at the top, so that the prose never has to state a number the
        params may change."""
        lines = [f"{self.params.name} (params: {self.params_file}), seed {self.params.seed}, "
                 f"batch_tokens {self.params.batch_tokens}"]
        for name in sections(self.name):
            values = getattr(self.params, name).model_dump()
            lines.append(f"{name}: " + ", ".join(f"{key}={value!r}" for key, value in values.items()))
        return "\n".join(wrapped for line in lines for wrapped in textwrap.wrap(
            line, PRINTED, subsequent_indent="    ", break_long_words=False, break_on_hyphens=False))

    def record(self, name: str, value, lo=None, hi=None, note: str = "", n: int | None = None) -> None:
        """Record a result this chapter declares (`ChapterSpec.results`; any other name is an AuditError) with its
        declared unit and meaning; `n`: the sampled units behind its interval, which an interval must have; a
        missing value (None, NaN) is recorded empty, its `note` saying why (else the generic NO_VALUE). It enters
        the results file with the chapter's other rows when the run succeeds (`finish_chapter`)."""
        declared = chapter_spec(self.name).declared(name)
        if (lo is not None or hi is not None) and n is None:
            raise AuditError(f"chapter '{self.name}' records '{name}' with an interval but no n: pass the number of "
                             "sampled units behind it")
        beyond = outside(declared.unit, value=value, lo=lo, hi=hi)
        if beyond:
            raise AuditError(f"chapter '{self.name}' records '{name}' with {', '.join(beyond)}, outside what its unit "
                             f"({declared.unit}) can take, {RANGES[declared.unit]}: clip the interval to the range "
                             "and say so in its note, or declare the right unit")
        if _missing(value) and not note:
            note = NO_VALUE
        self.results.record(self.name, name, value, lo=lo, hi=hi, unit=declared.unit, note=note, n=n,
                            meaning=declared.meaning)

    def record_table(self, table: pd.DataFrame | Mapping[str, object], note: str = "", n: int | None = None) -> None:
        """Record a table of results in one call: a mapping of name to value, or a frame indexed by name with a
        `value` column and any of `lo`, `hi`, `note`, `n` (a missing or empty cell: the row has none, and
        `note`/`n` given here stand for missing columns)."""
        rows = (table.to_dict("index") if isinstance(table, pd.DataFrame)
                else {name: {"value": value} for name, value in table.items()})
        for name, row in rows.items():
            cell: dict[str, Any] = {key: None if _missing(value) else value for key, value in row.items()}
            count = cell.get("n", n)
            self.record(str(name), row["value"], cell.get("lo"), cell.get("hi"), cell.get("note", note) or "",
                        None if count is None else int(count))

    def cases(self, parts: Iterable[pd.DataFrame]) -> None:
        """Save the chapter's case-level evidence (`llmaudit.report.evidence`: one record per evaluated item, with
        the test it feeds), given as frames of records; it replaces the previous run's cases/<chapter>.jsonl when
        the run succeeds."""
        parts = list(parts)
        records = pd.concat(parts, ignore_index=True) if parts else empty_records()
        write_cases(self.report_dir, self.name, records, staged=True)

    def vector(self, name: str) -> SteeringVector:
        """A vector saved by the steering-vectors chapter of this audit; its sha256 joins the chapter's provenance. A
        file that holds another vector than the one asked for (another name or concept, another model's, a block
        other than the steering chapter chose) is a one-line AuditError naming it."""
        path = self.vectors_dir / f"{name}.safetensors"
        if not path.exists():
            raise AuditError(f"no saved vector '{name}' in {self.vectors_dir}: run the steering_vectors chapter first")
        vector = SteeringVector.load(path)
        recorded = self.results.table(STEERING).set_index("name")["value"].get(result(name, "block"))
        problems = vector.mismatches(
            name=name, concept=chapter_spec(STEERING).concepts.get(name, vector.concept), model=self.params.name,
            weights=self.model.identity["weights"], blocks=self.model.n_layers, width=self.model.width,
            block=None if recorded is None else int(recorded))
        if problems:
            raise AuditError(f"saved vector {path} is not the vector '{name}' of {self.params.name} ("
                             f"{'; '.join(problems)}): rerun the steering_vectors chapter to save it again")
        note_vector(self.report_dir, self.name, name)
        return vector


def _missing(value: object) -> bool:
    """Whether a table cell holds no value (None, NaN or pandas' missing value)."""
    return not isinstance(value, (bool, np.bool_)) and missing(value)


def report_folder(report_dir: str | Path) -> Path:
    """The folder a chapter's report_dir parameter names: a relative one is taken from the repository root."""
    folder = Path(report_dir)
    return folder if folder.is_absolute() else REPO / folder


def open_chapter(name: str, params_file: str, report_dir: str, use_cache: bool = True) -> Chapter:
    """Set up a chapter from its papermill parameters; the run starts with none of the chapter's rows (it records
    them all again) and stages the settings they will come from, while the results file keeps the previous run's
    rows and settings until this run succeeds."""
    params = load_params(params_file)
    folder = report_folder(report_dir)
    folder.mkdir(parents=True, exist_ok=True)
    chapter = Chapter(name, params, folder, use_cache, params_file)
    chapter.results.clear(name)
    discard_pending_cases(folder, name)
    stage_provenance(folder, name, settings(params, name))
    return chapter


def finish_chapter(name: str, report_dir: str | Path) -> None:
    """After a chapter's run has succeeded, its recorded rows replace its previous rows in the results file, its
    settings the settings those rows came from, and its case records its previous case file."""
    folder = report_folder(report_dir)
    Results(folder / RESULTS).commit(name)
    commit_provenance(folder, name)
    commit_cases(folder, name)
