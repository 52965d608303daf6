"""Sphinx extension: the Audited models page's links open each model's report in the browser. A Markdown link to a
local file that is no page of the book becomes a download (Sphinx copies it under _downloads/ and marks the link
`download`), so the page links with plain <a> tags and this extension copies each audited model's report.html to
where those tags point: beside the built page, reports/<model>/report.html."""

from __future__ import annotations

import shutil
from pathlib import Path

from sphinx.application import Sphinx

from llmaudit.runner.contents import INDEX

REPORT = "report.html"


def copy_reports(source: Path, built: Path) -> list[Path]:
    """Copy every `source`/reports/<model>/report.html to `built`/reports/<model>/report.html; the copies made."""
    folder = Path(INDEX).parent
    copied = []
    for report in sorted((source / folder).glob(f"*/{REPORT}")):
        target = built / folder / report.parent.name / REPORT
        target.parent.mkdir(parents=True, exist_ok=True)
        copied.append(Path(shutil.copyfile(report, target)))
    return copied


def _copy(app: Sphinx, error: Exception | None) -> None:
    """After an HTML build that succeeded, copy the reports its Audited models page links."""
    if error is None and app.builder.format == "html":
        copy_reports(Path(app.srcdir), Path(app.outdir))


def setup(app: Sphinx) -> dict[str, object]:
    """Copy the audited models' reports once the build has finished."""
    app.connect("build-finished", _copy)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
