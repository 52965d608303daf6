"""One audit run: every chapter a params file lists, executed with papermill into reports/<model>/, then one
self-contained HTML report. Chapters cache their forward passes there, so a killed run resumes cheaply; a run holds
its report folder, so a second audit of the same model stops at once, and the folder belongs to one model (`owner`),
so that another model of the same name stops before it writes there."""

from __future__ import annotations

import fcntl
import os
import sys
import tempfile
import time
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path

import jupytext
import nbformat
import papermill
from nbclient.exceptions import DeadKernelError
from papermill.exceptions import PapermillExecutionError

from llmaudit.atomic import open_lock, writable, write_atomic
from llmaudit.capabilities import Capability
from llmaudit.config import ParamsFile, load_params, params_path, read_params_file
from llmaudit.errors import AuditError, ConfigError
from llmaudit.models.endpoint.client import offline as endpoint_offline
from llmaudit.models.endpoint.ledger import FOLDER as REQUESTS
from llmaudit.models.engines import can_run
from llmaudit.models.loading.weights import check_folder
from llmaudit.paths import BOOK, REPO
from llmaudit.reading import read_text
from llmaudit.registry import chapter as chapter_spec
from llmaudit.registry import notebook
from llmaudit.report import build_report
from llmaudit.report.audited import Audited, read_audited
from llmaudit.report.card import write_card
from llmaudit.report.index import build_index
from llmaudit.report.results_json import write_results_json
from llmaudit.runner.chapter import Chapter, finish_chapter, report_folder
from llmaudit.runner.needs import capabilities, kept, record_unmeasured
from llmaudit.runner.owner import check_owner, claim, source_of
from llmaudit.runner.snapshot import edited_note, snapshot
from llmaudit.terminal import clipped, printable

CELL_TIMEOUT_S = 3600
# The chapters' progress bars are text on stderr by design; in a kernel without ipywidgets, tqdm.auto (which
# transformers imports) would add a warning about notebook widgets to every chapter's stderr.
QUIET_WIDGETS = "ignore:IProgress not found"
LOCK = ".audit.lock"  # in a report folder: held by the audit run writing it, and naming that run's pid
# The kernel shares this process's stderr: its own log (a warning on every start, a traceback when an interrupted run
# closes its sockets) is not the chapter's output, which reaches stderr through papermill; a crash's message still does.
KERNEL_QUIET = ["--IPKernelApp.log_level=CRITICAL"]


def chapter_source(chapter: str) -> Path:
    """The jupytext source of a chapter key; an unknown key or a missing file is a one-line AuditError."""
    path = BOOK / f"{notebook(chapter)}.md"
    if not path.is_file():
        raise AuditError(f"chapter source {path} is missing: restore it from the repository")
    return path


def execute_chapter(
    chapter: str, params_file: str, report_dir: str | Path, output: Path, use_cache: bool = True, progress: bool = True,
    can: Collection[Capability] | None = None,
) -> Path:
    """Execute one chapter with papermill into `output`; a failing cell stops with its error and the partial notebook,
    and only a run that succeeds replaces the chapter's rows in the results file. With `progress`, the chapter's
    progress bars (forward passes, sweeps, sampling) reach this process's stderr as they advance. `can`: what the
    model's engine can do, where it cannot do everything (an endpoint's): the cells needing more are left out and the
    tests they would have measured recorded not measurable, with the reason (`runner.needs`)."""
    source_notebook = jupytext.read(chapter_source(chapter))
    source_notebook = kept(source_notebook, frozenset(Capability) if can is None else can)
    writable(output)  # papermill writes the executed notebook there after every cell: a FIFO would block it
    _quiet_widget_warning()
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / f"{notebook(chapter)}.ipynb"
        jupytext.write(source_notebook, source)
        try:
            papermill.execute_notebook(
                str(source),
                str(output),
                parameters={"params_file": params_file, "report_dir": str(report_dir), "use_cache": use_cache},
                kernel_name="python3",
                cwd=str(REPO),
                execution_timeout=CELL_TIMEOUT_S,
                progress_bar=False,
                stderr_file=sys.stderr if progress else None,  # the chapter's own progress bars, with time left
                extra_arguments=KERNEL_QUIET,
            )
        except DeadKernelError:  # killed from outside: what kills a kernel mid-chapter is running out of memory
            raise AuditError(
                f"chapter {chapter}'s kernel died, most likely out of memory (the machine's, or a limit such as "
                "ulimit -v): lower batch_tokens in the params file (or tasks.lambda_batch, which multiplies it in "
                f"sweeps), or free memory (partial notebook: {output})"
            ) from None
        except PapermillExecutionError as err:
            raise AuditError(
                f"chapter {chapter} failed in cell {err.exec_count}: {err.ename}: {err.evalue}"
                f" (partial notebook: {output})".replace("\n", " ")
            ) from None
    _one_parameters_cell(output)
    if can is not None:
        record_unmeasured(Chapter(chapter, load_params(str(REPO / params_file)), report_folder(report_dir)), can)
    finish_chapter(chapter, report_dir)
    return output


def _quiet_widget_warning() -> None:
    """Let the kernels papermill starts (they inherit this environment) ignore tqdm's missing-widget warning, keeping
    any warning filters the user set."""
    filters = [f for f in os.environ.get("PYTHONWARNINGS", "").split(",") if f]
    if QUIET_WIDGETS not in filters:
        os.environ["PYTHONWARNINGS"] = ",".join([*filters, QUIET_WIDGETS])


def _one_parameters_cell(path: Path) -> None:
    """Hide papermill's injected parameters cell as the chapter's own parameters cell is hidden: the reader sees the
    values the chapter ran with once, in the settings its setup cell prints."""
    executed = nbformat.read(path, as_version=4)
    for cell in executed.cells:
        tags = cell.metadata.setdefault("tags", [])
        if "injected-parameters" in tags and "remove-cell" not in tags:
            tags.append("remove-cell")
    nbformat.write(executed, path)


def run_audit(model: str, reports: Path = REPO / "reports", chapters: list[str] | None = None) -> Path:
    """Run the listed (default: all the params') chapters for `model` (a params name or file) in `reports`/<name>,
    which the run holds, write its model card, rebuild its HTML report and the cross-model index; returns the report
    path. A relative `reports` or params path is taken from the current directory, for the chapters as well."""
    return audit(_params(model), reports=reports, chapters=chapters)


def audit(run: ParamsFile, *, reports: Path = REPO / "reports", chapters: list[str] | None = None,
          write: bool = False, check: Callable[[], object] = lambda: None, offline: bool = False) -> Path:
    """`run_audit` for params as read once (`run`); with `write`, the run first writes their text to their path once
    it holds the report folder (an audit of `--model` runs from the params it writes there, and a second run on the
    folder must not replace them under the first). A chapter the params do not list is refused: the report shows the
    listed chapters, and would show its rows and verdicts but not its section. Before any chapter, the report folder
    must be this model's or no model's (`owner`), a local model folder must hold weights of its config's shape
    (`models.loading.weights`), and `check` (the caller's own checks) must pass. With `offline`, an endpoint's audit
    is rebuilt from its request ledger alone: a request the ledger does not hold stops the run in one line."""
    params = run.params
    chosen = chapters or params.chapters
    for chapter in chosen:
        chapter_source(chapter)
    unlisted = [chapter for chapter in chosen if chapter not in params.chapters]
    if unlisted:
        raise ConfigError(f"--chapter {unlisted[0]}: {run.path.name} does not list it under chapters (it lists "
                          f"{', '.join(params.chapters)}): add it there, or leave chapters out to run every chapter")
    reports = Path(reports).resolve()
    report_dir = reports / params.name
    source = source_of(params.model)
    how = ("audit it under a name of its own (--name NAME) or into another --reports folder" if write else
           f"give it a name of its own (name: in {clipped(run.path.name)}) or another --reports folder")
    check_owner(report_dir, source, how)  # before anything is written there, even the lock
    if params.model.path is not None:
        check_folder(Path(params.model.path), trust_remote_code=params.model.trust_remote_code)
    check()
    for chapter in chosen:
        chapter_spec(chapter).preflight(params, reports)
        if params.model.endpoint is None:
            _engine_can_run(chapter, params)
    if offline and params.model.endpoint is None:
        raise ConfigError("--offline rebuilds an endpoint's audit from its request ledger: it goes with --endpoint")
    with _held(report_dir), endpoint_offline(report_dir / REQUESTS) if offline else nullcontext():
        claim(report_dir, source, how)  # again under the lock: a run that began meanwhile may have recorded its model
        # an endpoint runs what it can of every chapter, its other tests not measurable with the reason (`needs`)
        can = None if params.model.endpoint is None else capabilities(params.name, params.model, report_dir / REQUESTS)
        if write:
            write_atomic(run.path, run.text)
        ran = snapshot(run, report_dir)
        timings = {}
        for i, chapter in enumerate(chosen, start=1):
            print(f"[{i}/{len(chosen)}] {chapter}", file=sys.stderr, flush=True)
            started = time.perf_counter()
            execute_chapter(chapter, _seen(ran), _seen(report_dir), report_dir / f"{notebook(chapter)}.ipynb",
                            can=can)
            timings[chapter] = time.perf_counter() - started
            print(f"[{i}/{len(chosen)}] {chapter} done in {timings[chapter] / 60:.1f} min", file=sys.stderr, flush=True)
        write_card(report_dir, run, timings)
        audited = read_audited(report_dir)
        _say_mixed(audited, run.path)
        edited = edited_note(run)
        if edited:
            print(edited, file=sys.stderr, flush=True)
        write_results_json(audited)
        executed = {c: report_dir / f"{notebook(c)}.ipynb" for c in params.chapters}
        notebooks = [_readable(path, c) for c, path in executed.items() if path.exists()]
        report = build_report(audited, f"Bias audit of {params.name}", notebooks)
        build_index(reports, audited)
    return report


def _engine_can_run(chapter: str, params) -> None:
    """Refuse, before any chapter runs, a chapter that needs what the engine of a local or remote model cannot do
    (an endpoint's audit runs what it can of every chapter instead, `runner.needs`)."""
    engine, can = can_run(remote=params.model.remote)
    missing = [str(need) for need in chapter_spec(chapter).needs(params) if need not in can]
    if missing:
        where = "a remote model" if params.model.remote else "this model"
        raise ConfigError(f"chapter {chapter} needs {' and '.join(missing)}, which the {engine} engine of {where} "
                          f"cannot give: leave {chapter} out of the params' chapters")


def _say_mixed(audited: Audited, params_file: Path) -> None:
    """One note on stderr per chapter whose rows came from other settings than `params_file`'s or other vectors than
    those saved now, as its model card records them (the report's model card shows the same)."""
    for chapter, entry in audited.provenance.items():
        if entry["settings"] is not None and entry["differs"]:
            name = printable(chapter)
            print(f"note: the rows of {name} came from other settings than {printable(params_file.name)} and the "
                  f"saved vectors: {printable('; '.join(entry['differs']))}; rerun it (--chapter {name}) or audit "
                  "under another name", file=sys.stderr, flush=True)


def _params(model: str) -> ParamsFile:
    """The params of a model name or params path as read once, with their file's absolute path; a file that cannot
    be read as text (a folder, a binary file) is a one-line ConfigError. A link is kept as named (its name says it is
    YAML, and its folder is where relative paths in it start), not followed."""
    path = params_path(model).absolute()
    try:
        return read_params_file(path)
    except (OSError, UnicodeDecodeError) as err:
        reason = err.strerror if isinstance(err, OSError) else " ".join(str(err).split())
        raise ConfigError(f"cannot read params file {path} ({reason}): give a YAML file") from None


def _seen(path: Path) -> str:
    """An absolute path as the chapters (cwd: the repository) are given it: relative to the repository where it lies
    inside (executed notebooks then name no user folder), else absolute."""
    return str(path.relative_to(REPO) if path.is_relative_to(REPO) else path)


@contextmanager
def _held(report_dir: Path) -> Iterator[None]:
    """Hold a report folder for one audit run with an exclusive lock on its lock file, which names the holder's pid:
    a second run on the folder stops at once naming that pid. The lock dies with its process, so the lock file of a
    killed run is taken over. A folder that cannot be created or written to is a one-line AuditError."""
    lock = report_dir / LOCK
    try:
        handle = open_lock(lock)
    except OSError as err:
        raise AuditError(
            f"cannot write the report folder {report_dir} ({err.strerror or err}): choose a writable --reports folder"
        ) from None
    with handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "unknown"
            raise AuditError(
                f"report folder {report_dir} is busy: audit process {holder} is writing it (lock {lock}); wait until it"
                " ends or give another --reports folder"
            ) from None
        handle.truncate(0)
        handle.write(f"{os.getpid()}\n")
        handle.flush()
        try:
            yield
        finally:
            handle.truncate(0)


def _readable(path: Path, chapter: str) -> Path:
    """A chapter's executed notebook, checked before the report reads it: a damaged one is a one-line AuditError."""
    fix = f"rerun its chapter (--chapter {chapter})"
    try:
        nbformat.validate(nbformat.reads(read_text(path, fix), as_version=4))
    except (OSError, ValueError, AttributeError, TypeError, nbformat.ValidationError) as err:
        # nbformat reports a damaged file with any of these, depending on where the damage lies
        raise AuditError(f"executed notebook {path} is damaged ({type(err).__name__}): {fix}") from None
    return path
