"""One audit run: every chapter a params file lists, executed with papermill into reports/<model>/, then one
self-contained HTML report. Chapters cache their forward passes there, so a killed run resumes cheaply."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import jupytext
import papermill
from papermill.exceptions import PapermillExecutionError

from llmaudit.config import REPO, load_params, params_path
from llmaudit.errors import AuditError
from llmaudit.report import build_report
from llmaudit.report.card import write_card
from llmaudit.report.index import build_index

BOOK = REPO / "book"
CHAPTERS = {
    "steering_vectors": "01_steering_vectors",
    "decision_tasks": "02_decision_tasks",
    "robustness": "03_robustness",
    "validity": "04_validity",
    "framing": "05_framing",
    "similarity": "06_similarity",
    "markedness": "07_markedness",
}
CELL_TIMEOUT_S = 3600


def chapter_source(chapter: str) -> Path:
    """The jupytext source of a chapter key."""
    if chapter not in CHAPTERS:
        raise AuditError(f"unknown chapter '{chapter}': known chapters are {', '.join(CHAPTERS)}")
    return BOOK / f"{CHAPTERS[chapter]}.md"


def execute_chapter(
    chapter: str, params_file: str, report_dir: Path, output: Path, use_cache: bool = True, progress: bool = True
) -> Path:
    """Execute one chapter with papermill into `output`; a failing cell stops with its error and the partial notebook."""
    notebook = jupytext.read(chapter_source(chapter))
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / f"{CHAPTERS[chapter]}.ipynb"
        jupytext.write(notebook, source)
        try:
            papermill.execute_notebook(
                str(source),
                str(output),
                parameters={"params_file": params_file, "report_dir": str(report_dir), "use_cache": use_cache},
                kernel_name="python3",
                cwd=str(REPO),
                execution_timeout=CELL_TIMEOUT_S,
                progress_bar=progress,
            )
        except PapermillExecutionError as err:
            raise AuditError(
                f"chapter {chapter} failed in cell {err.exec_count}: {err.ename}: {err.evalue}"
                f" (partial notebook: {output})".replace("\n", " ")
            ) from None
    return output


def run_audit(model: str, reports: Path = REPO / "reports", chapters: list[str] | None = None) -> Path:
    """Run the listed (default: all the params') chapters for `model`, write its model card, rebuild its HTML
    report and the cross-model index; returns the report path."""
    params = load_params(model)
    report_dir = reports / params.name
    report_dir.mkdir(parents=True, exist_ok=True)
    shown = report_dir.relative_to(REPO) if report_dir.is_relative_to(REPO) else report_dir
    timings = {}
    for chapter in chapters or params.chapters:
        started = time.perf_counter()
        execute_chapter(chapter, model, shown, report_dir / f"{CHAPTERS[chapter]}.ipynb")
        timings[chapter] = time.perf_counter() - started
    write_card(report_dir, params, params_path(model), timings)
    notebooks = [report_dir / f"{CHAPTERS[c]}.ipynb" for c in params.chapters if c in CHAPTERS]
    report = build_report(report_dir, f"Bias audit of {params.name}", [p for p in notebooks if p.exists()])
    build_index(reports)
    return report
