"""The book's Audited models page opens each model's report instead of downloading it: the built book holds each
report where the page's links point (reports/<model>/report.html beside the page)."""

from __future__ import annotations

from pathlib import Path

from llmaudit.runner.bookreports import copy_reports


def test_each_report_is_copied_beside_the_built_index_page(tmp_path: Path) -> None:
    source, built = tmp_path / "repo", tmp_path / "_build" / "html"
    for model in ("a", "b c"):
        (source / "reports" / model).mkdir(parents=True)
        (source / "reports" / model / "report.html").write_text(f"<p>{model}</p>")
    (source / "reports" / "no-report").mkdir()
    copied = copy_reports(source, built)
    assert [p.relative_to(built).as_posix() for p in copied] == ["reports/a/report.html", "reports/b c/report.html"]
    assert (built / "reports" / "b c" / "report.html").read_text() == "<p>b c</p>"
