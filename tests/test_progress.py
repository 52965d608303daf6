"""What the terminal shows during an audit: which chapter runs, the chapter's own progress bars as they advance
(the kernel's stderr, streamed), and each chapter's wall time."""

from __future__ import annotations

import nbformat

from llmaudit.cli import main
from llmaudit.runner import audit


def test_chapter_progress_reaches_the_terminal(tmp_path, monkeypatch, capsys) -> None:
    seen = {}

    def execute(source, output, **kwargs):
        """Stands in for papermill: the kernel's progress bar goes to the stream it was given."""
        seen.update(kwargs)
        kwargs["stderr_file"].write("credit sweep:  50%|#####     | 24/48 [01:10<01:10]\r")
        nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# Steering vectors")]), output)

    monkeypatch.setattr(audit.papermill, "execute_notebook", execute)
    assert main(["audit", "ci", "--reports", str(tmp_path), "--chapter", "steering_vectors"]) == 0
    err = capsys.readouterr().err
    assert "[1/1] steering_vectors\n" in err and "credit sweep:  50%" in err
    assert "[1/1] steering_vectors done in" in err and seen["progress_bar"] is False
