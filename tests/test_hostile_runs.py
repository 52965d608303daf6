"""An audit run against hostile settings and events (issue 46): Ctrl-C, a kernel killed under a memory limit, a
5,001-value lambda grid, a model compared with itself, a chapter the params file leaves out, relative paths in a
params file and a params file reached through a link; each is one line before the first chapter (or a documented
behaviour)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import jupytext
import pytest
import yaml
from nbclient.exceptions import DeadKernelError
from nbformat.v4 import new_code_cell, new_notebook

from llmaudit.config import load_params, read_params_file
from llmaudit.errors import AuditError, ConfigError
from llmaudit.paths import PARAMS_DIR
from llmaudit.runner import audit
from llmaudit.runner.snapshot import snapshot


def ci_params(folder: Path, name: str = "p.yaml", **changes: object) -> Path:
    """The ci params file with `changes` to its top-level keys, written to `folder`/`name`."""
    params = yaml.safe_load((PARAMS_DIR / "ci.yaml").read_text(encoding="utf-8")) | changes
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(yaml.safe_dump(params, sort_keys=False), encoding="utf-8")
    return path


@pytest.fixture
def no_chapter(monkeypatch) -> None:
    """A run that would start a chapter fails the test: what these tests refuse is refused before the first one."""
    def started(*args: object, **kwargs: object) -> None:
        raise AssertionError("a chapter started")

    monkeypatch.setattr(audit, "execute_chapter", started)


SLEEPER = """
import sys
import signal
from pathlib import Path

from llmaudit import cli
from llmaudit.runner import audit
from llmaudit.runner.snapshot import snapshot

signal.signal(signal.SIGINT, signal.default_int_handler)  # as at a terminal, even when started in the background
audit.chapter_source = lambda chapter: Path(sys.argv[1])
sys.exit(cli.main(["audit", "ci", "--chapter", "decision_tasks", "--reports", sys.argv[2]]))
"""


def test_ctrl_c_during_a_chapter_is_one_line(tmp_path) -> None:
    source = new_notebook(cells=[
        new_code_cell('params_file = ""\nreport_dir = ""\nuse_cache = True', metadata={"tags": ["parameters"]}),
        new_code_cell("import time\nfrom pathlib import Path\n(Path(report_dir) / 'started').touch()\n"
                      "for _ in range(600):\n    time.sleep(0.1)"),
    ])
    source.metadata["kernelspec"] = {"name": "python3", "language": "python", "display_name": "Python 3"}
    jupytext.write(source, tmp_path / "sleeper.md", fmt="md:myst")
    run = subprocess.Popen([sys.executable, "-c", SLEEPER, str(tmp_path / "sleeper.md"), str(tmp_path / "reports")],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    started = time.monotonic()
    while not (tmp_path / "reports" / "ci" / "started").exists() and time.monotonic() - started < 120:
        assert run.poll() is None, run.communicate()
        time.sleep(0.2)
    time.sleep(1)
    os.killpg(run.pid, signal.SIGINT)  # as Ctrl-C at a terminal: the whole foreground group
    _, error = run.communicate(timeout=60)
    lines = error.strip().splitlines()
    assert run.returncode == 130, error
    assert lines[-1].startswith("llmaudit: interrupted: ") and "Traceback" not in error, error
    assert all(line.startswith(("[1/1] decision_tasks", "llmaudit: interrupted")) for line in lines), error


def test_a_kernel_that_dies_is_the_out_of_memory_line(tmp_path, monkeypatch) -> None:
    def killed(*args: object, **kwargs: object) -> None:
        raise DeadKernelError("Kernel died")

    monkeypatch.setattr(audit.papermill, "execute_notebook", killed)
    with pytest.raises(AuditError, match=r"kernel died, most likely out of memory .* lower batch_tokens") as err:
        audit.execute_chapter("decision_tasks", "params/ci.yaml", tmp_path, tmp_path / "out.ipynb")
    assert "\n" not in str(err.value)


def test_a_lambda_grid_past_the_cap_is_one_line(tmp_path) -> None:
    grid = [round(-10 + i * 0.004, 3) for i in range(5001)]
    tasks = yaml.safe_load((PARAMS_DIR / "ci.yaml").read_text(encoding="utf-8"))["tasks"] | {"lambdas": grid}
    with pytest.raises(ConfigError, match=r"tasks:lambdas: list at most 101 steering coefficients \(got 5001\)"):
        load_params(ci_params(tmp_path, tasks=tasks))


def test_compare_with_naming_the_audited_model_is_refused_first(tmp_path, no_chapter) -> None:
    path = ci_params(tmp_path, similarity={"compare_with": ["ci"]})
    with pytest.raises(ConfigError, match=r"similarity.compare_with names ci, the model this params file audits"):
        audit.run_audit(str(path), reports=tmp_path / "reports")


def test_a_chapter_the_params_file_leaves_out_is_refused_first(tmp_path, no_chapter) -> None:
    path = ci_params(tmp_path, chapters=["steering_vectors", "decision_tasks"])
    with pytest.raises(ConfigError, match=r"--chapter framing: p.yaml does not list it under chapters"):
        audit.run_audit(str(path), reports=tmp_path / "reports", chapters=["framing"])


def test_relative_model_path_and_data_dir_start_at_the_params_folder(tmp_path, monkeypatch) -> None:
    (tmp_path / "audit" / "mirror").mkdir(parents=True)
    ci_params(tmp_path / "audit", model={"path": "weights"}, data_dir="mirror")
    monkeypatch.chdir(tmp_path)
    params = load_params(Path("audit") / "p.yaml")
    assert params.model.path == str(tmp_path / "audit" / "weights")
    assert params.data_dir == str(tmp_path / "audit" / "mirror")
    missing = ci_params(tmp_path / "audit", "q.yaml", data_dir="absent")
    with pytest.raises(ConfigError, match=r"q.yaml:data_dir: .*audit/absent is not a folder"):
        load_params(missing)


def test_the_chapters_copy_of_the_params_means_what_the_file_meant(tmp_path) -> None:
    """The chapters read a copy in the report folder: relative paths in it must still name what the file named."""
    (tmp_path / "audit" / "mirror").mkdir(parents=True)
    run = read_params_file(ci_params(tmp_path / "audit", model={"path": "weights"}, data_dir="mirror"))
    copied = load_params(snapshot(run, tmp_path / "reports" / "ci"))
    assert (copied.model.path, copied.data_dir) == (run.params.model.path, run.params.data_dir)
    plain = read_params_file(ci_params(tmp_path / "elsewhere"))
    assert snapshot(plain, tmp_path / "reports" / "x").read_text(encoding="utf-8") == plain.text  # copied as it is


def test_a_params_link_is_read_by_its_own_name(tmp_path) -> None:
    target = ci_params(tmp_path, "settings.txt")
    (tmp_path / "link.yaml").symlink_to(target)
    run = audit._params(str(tmp_path / "link.yaml"))
    assert run.path.name == "link.yaml" and run.params.name == "ci"
    assert load_params(run.path).name == "ci"  # as the chapters read it


@pytest.mark.parametrize("chapter", ["framing", "markedness"])
def test_a_chapter_a_remote_model_cannot_run_is_refused_first(tmp_path, no_chapter, chapter) -> None:
    """Sampling is not something the traced engine of a remote model does: refused in one line before any chapter,
    naming the engine and the lack (it stopped mid-chapter before)."""
    ci = yaml.safe_load((PARAMS_DIR / "ci.yaml").read_text(encoding="utf-8"))
    path = ci_params(tmp_path, model={"hf": "some/model", "remote": True},
                     markedness=ci["markedness"] | {"decoding": "sampled"})
    with pytest.raises(ConfigError, match=rf"^chapter {chapter} needs sampled answers, which the traced engine of a "
                                          r"remote model cannot give: leave"):
        audit.run_audit(str(path), reports=tmp_path / "reports", chapters=[chapter])
