"""State left on disk by earlier, failed, concurrent or tampered runs: results replaced only when a chapter
succeeds, checksummed caches, vectors and converted weights, one audit per report folder, one folder per audit,
and one line (exit status 2) for every failure that is the user's or the disk's."""

from __future__ import annotations

import json
import multiprocessing
import os
import re
import subprocess
import textwrap
from pathlib import Path
from types import SimpleNamespace

import nbformat
import pandas as pd
import papermill
import pytest
import torch
from papermill.exceptions import PapermillExecutionError

from llmaudit.cache import cached_tensors
from llmaudit.chapters.similarity.saved import save_systems
from llmaudit.chapters.steering_vectors import SteeringVector
from llmaudit.cli import main
from llmaudit.config import PARAMS_DIR, REPO
from llmaudit.errors import AuditError
from llmaudit.models.loading import load
from llmaudit.report import Results, card
from llmaudit.runner import audit
from llmaudit.runner.chapter import Chapter, open_chapter
from llmaudit.terminal import _unsafe
from test_similarity_systems import answers


def flip_last_byte(path: Path) -> None:
    """Alter one byte of a file's tensor data (the last byte of a safetensors file belongs to its last tensor)."""
    data = bytearray(path.read_bytes())
    data[-1] ^= 0x01
    path.write_bytes(bytes(data))


def truncate(path: Path) -> None:
    """Cut a file in half, as a full disk or a killed copy leaves it."""
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


PROGRESS = re.compile(r"\[\d+/\d+\] ")  # the "[1/7] chapter" lines an audit prints as it goes


def one_line_exit_2(capsys, argv: list[str], *needles: str) -> str:
    """Run the command line; it must end with exit status 2 and one stderr line (beside the chapters' progress
    lines) containing every needle."""
    code = main(argv)
    lines = [line for line in capsys.readouterr().err.strip().splitlines() if not PROGRESS.match(line)]
    assert code == 2 and len(lines) == 1, lines
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


# --- 5: a chapter's rows are replaced only when it succeeds ---------------------------------------------------------


def previous_results(folder: Path) -> Results:
    """A results file holding an earlier run of decision_tasks (one row its code no longer records) and of another
    chapter."""
    results = Results(folder / "results.csv")
    results.record("decision_tasks", "credit.blackbox_explicit", 1.0)
    results.record("decision_tasks", "stale", 2.0)
    results.record("steering_vectors", "corr", 3.0)
    return results


def fake_chapter(monkeypatch, rows: dict[str, float], fail: bool) -> None:
    """papermill replaced by a chapter that opens decision_tasks, records `rows` and then fails or succeeds."""

    def execute_notebook(source, output, parameters, **kwargs):
        chapter = open_chapter("decision_tasks", parameters["params_file"], parameters["report_dir"], False)
        for name, value in rows.items():
            chapter.record(name, value)
        assert chapter.results.table("decision_tasks")["name"].tolist() == list(rows)  # the run sees its own rows
        if fail:
            raise PapermillExecutionError(3, 3, "", "RuntimeError", "boom", [])
        nbformat.write(nbformat.v4.new_notebook(), output)

    monkeypatch.setattr(papermill, "execute_notebook", execute_notebook)


def test_killed_chapter_keeps_its_previous_rows(tmp_path) -> None:
    previous_results(tmp_path)
    chapter = open_chapter("decision_tasks", "ci", str(tmp_path), False)
    chapter.record("credit.blackbox_explicit", 0.10)  # ...and the kernel dies here
    table = Results(tmp_path / "results.csv").table()
    assert table.set_index("name")["value"].to_dict() == {"credit.blackbox_explicit": 1.0, "stale": 2.0, "corr": 3.0}


def test_failed_chapter_keeps_its_previous_rows_and_a_successful_one_replaces_them(tmp_path, monkeypatch) -> None:
    previous_results(tmp_path)
    fake_chapter(monkeypatch, {"credit.blackbox_explicit": 0.10}, fail=True)
    with pytest.raises(AuditError, match="chapter decision_tasks failed"):
        audit.execute_chapter("decision_tasks", "ci", tmp_path, tmp_path / "02.ipynb", progress=False)
    table = Results(tmp_path / "results.csv").table()
    assert table.set_index("name")["value"].to_dict() == {"credit.blackbox_explicit": 1.0, "stale": 2.0, "corr": 3.0}

    fake_chapter(monkeypatch, {"credit.blackbox_explicit": 0.11, "credit.blackbox_implicit": 0.12}, fail=False)
    audit.execute_chapter("decision_tasks", "ci", tmp_path, tmp_path / "02.ipynb", progress=False)
    table = Results(tmp_path / "results.csv").table()
    assert table.set_index("name")["value"].to_dict() == {"corr": 3.0, "credit.blackbox_explicit": 0.11,
                                                          "credit.blackbox_implicit": 0.12}
    assert not [p for p in tmp_path.iterdir() if "pending" in p.name or p.suffix == ".tmp"]


# --- 5b: each chapter's rows keep the params they came from -------------------------------------------------------


RECORDED = {chapter: rows["name"].iloc[0]  # one name each chapter declares, as the ci audit recorded it
            for chapter, rows in pd.read_csv(Path(__file__).parent / "notebooks" / "results.csv").groupby("chapter")}


def recording_chapters(monkeypatch, fail: bool = False) -> None:
    """papermill replaced by a chapter that opens the chapter its notebook names, records one row and then succeeds
    (or fails)."""

    def execute_notebook(source, output, parameters, **kwargs):
        name = Path(source).stem.split("_", 1)[1]
        chapter = open_chapter(name, parameters["params_file"], parameters["report_dir"], False)
        if name != "steering_vectors" and (chapter.vectors_dir / "gender_lang.safetensors").exists():
            chapter.vector("gender_lang")
        chapter.record(RECORDED[name], 1.0)
        if fail:
            raise PapermillExecutionError(3, 3, "", "RuntimeError", "boom", [])
        nbformat.write(nbformat.v4.new_notebook(), output)

    monkeypatch.setattr(papermill, "execute_notebook", execute_notebook)
    monkeypatch.setattr(card, "_git_commit", lambda: None)
    known_model(monkeypatch)


def test_a_chapter_rerun_with_edited_params_is_recorded_per_chapter(tmp_path, monkeypatch, capsys) -> None:
    """The old card held the last run's params text alone: after `judicial_conviction: 6 -> 5` and a rerun of
    another chapter it said 5 beside decision_tasks' rows computed with 6, and nothing told them apart."""
    params = tmp_path / "edited.yaml"
    params.write_text((PARAMS_DIR / "ci.yaml").read_text().replace("judicial_conviction: 6", "judicial_conviction: 5"))
    reports, folder = tmp_path / "reports", tmp_path / "reports" / "ci"
    recording_chapters(monkeypatch)
    assert main(["audit", "ci", "--reports", str(reports), "--chapter", "decision_tasks"]) == 0
    assert main(["audit", str(params), "--reports", str(reports), "--chapter", "steering_vectors"]) == 0
    chapters = json.loads((folder / "model_card.json").read_text())["chapters"]
    assert chapters["decision_tasks"]["differs"] == ["tasks.sizes.judicial_conviction: 6 (params file: 5)"]
    assert chapters["decision_tasks"]["settings"]["tasks"]["sizes"]["judicial_conviction"] == 6
    assert chapters["steering_vectors"]["differs"] == [] and "tasks" not in chapters["steering_vectors"]["settings"]
    notes = [line for line in capsys.readouterr().err.splitlines() if line.startswith("note:")]
    assert len(notes) == 1 and "the rows of decision_tasks came from other settings than edited.yaml" in notes[0], notes
    page = (folder / "report.html").read_text()
    assert "Not every chapter's rows came from this params file and the vectors saved now" in page
    assert ("decision_tasks: tasks.sizes.judicial_conviction: 6 (params file: 5)<br>steering_vectors: this params"
            in page)

    recording_chapters(monkeypatch, fail=True)  # a failed rerun leaves rows and their settings as they were
    assert main(["audit", str(params), "--reports", str(reports), "--chapter", "decision_tasks"]) == 2
    assert json.loads((folder / "provenance" / "decision_tasks.json").read_text())["settings"]["tasks"]["sizes"][
        "judicial_conviction"] == 6
    recording_chapters(monkeypatch)  # a successful one replaces both
    assert main(["audit", str(params), "--reports", str(reports), "--chapter", "decision_tasks"]) == 0
    chapters = json.loads((folder / "model_card.json").read_text())["chapters"]
    assert [entry["differs"] for entry in chapters.values()] == [[], []]
    assert "every chapter&#x27;s rows came from this params file" in (folder / "report.html").read_text()


def test_a_vector_saved_again_after_a_chapter_read_it_is_named(tmp_path, monkeypatch, capsys) -> None:
    """Rerunning only the steering chapter saves new vectors; the chapters that read the old ones say so."""
    reports, folder = tmp_path / "reports", tmp_path / "reports" / "ci"
    saved_vector(folder / "vectors")
    recording_chapters(monkeypatch)
    assert main(["audit", "ci", "--reports", str(reports), "--chapter", "decision_tasks"]) == 0
    read = json.loads((folder / "provenance" / "decision_tasks.json").read_text())["vectors"]
    assert list(read) == ["gender_lang"]
    flip_last_byte(folder / "vectors" / "gender_lang.safetensors")  # as a rerun of the steering chapter saves anew
    assert main(["audit", "ci", "--reports", str(reports), "--chapter", "steering_vectors"]) == 0
    differs = json.loads((folder / "model_card.json").read_text())["chapters"]["decision_tasks"]["differs"]
    assert len(differs) == 1 and differs[0].startswith(f"vectors.gender_lang: {read['gender_lang'][:12]} (saved now: ")
    assert "note: the rows of decision_tasks came from other settings" in capsys.readouterr().err


def test_rows_from_before_provenance_was_kept_say_so(tmp_path, ran) -> None:
    write_results(tmp_path / "ci")
    assert main(["audit", "ci", "--reports", str(tmp_path), "--chapter", "steering_vectors"]) == 0
    chapters = json.loads((tmp_path / "ci" / "model_card.json").read_text())["chapters"]
    assert chapters == {"steering_vectors": {"settings": None, "sha256": None, "vectors": {}, "differs": [
        "params not recorded (rows of an older version): rerun --chapter steering_vectors"]}}


# --- 6 and 7: checksums on cache entries, saved vectors and converted weights ---------------------------------------


@pytest.mark.parametrize("damage", [truncate, flip_last_byte])
def test_damaged_cache_entry_is_recomputed_with_a_warning(tmp_path, damage) -> None:
    calls = []

    def compute():
        calls.append(1)
        return {"probs": torch.arange(12.0).reshape(3, 4)}

    cached_tensors(tmp_path, {"prompts": ["a"]}, compute)
    (entry,) = tmp_path.glob("*.safetensors")
    damage(entry)
    with pytest.warns(UserWarning, match=entry.name):
        again = cached_tensors(tmp_path, {"prompts": ["a"]}, compute)
    assert len(calls) == 2 and torch.equal(again["probs"], torch.arange(12.0).reshape(3, 4))
    assert torch.equal(cached_tensors(tmp_path, {"prompts": ["a"]}, compute)["probs"], again["probs"])
    assert len(calls) == 2  # the rewritten entry is good again


MODEL = SimpleNamespace(identity={"weights": "f00d"}, n_layers=4, width=8)  # the audited model, as vectors see it


def known_model(monkeypatch) -> None:
    """Chapters see `MODEL` as their model instead of loading the ci model."""
    monkeypatch.setattr(Chapter, "model", MODEL)


def saved_vector(folder: Path, name: str = "gender_lang", concept: str = "gender", **meta) -> Path:
    """A small steering vector of the ci audit's `MODEL` saved under `folder` (`meta` replaces its recorded
    model)."""
    gen = torch.Generator().manual_seed(1)
    direction, mean = torch.randn(8, generator=gen), torch.randn(8, generator=gen)
    recorded = {"model": "ci", "weights": MODEL.identity["weights"]} | meta
    vector = SteeringVector(name, concept, 2, direction, mean, 0.5, meta=recorded)
    return vector.save(folder)


@pytest.mark.parametrize("damage", [truncate, flip_last_byte])
def test_damaged_vector_is_a_one_line_error(tmp_path, damage) -> None:
    path = saved_vector(tmp_path / "vectors")
    damage(path)
    with pytest.raises(AuditError) as info:
        open_chapter("decision_tasks", "ci", str(tmp_path), False).vector("gender_lang")
    message = str(info.value)
    assert "\n" not in message and str(path) in message and "rerun the steering_vectors chapter" in message


def test_vector_with_altered_scale_is_refused(tmp_path) -> None:
    path = saved_vector(tmp_path)
    path.write_bytes(path.read_bytes().replace(b'\\"k\\": 0.5', b'\\"k\\": 5.0'))
    with pytest.raises(AuditError, match="rerun the steering_vectors chapter"):
        SteeringVector.load(path)


@pytest.fixture
def fake_gguf(tmp_path, monkeypatch):
    """A GGUF file whose 'conversion' (transformers' GGUF loading, replaced) gives the tiny test model; the list
    counts conversions."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from conftest import build_hf_model, build_tokenizer

    conversions = []

    def tokenizer(cls, *args, **kwargs):
        return build_tokenizer()

    def model(cls, *args, **kwargs):
        conversions.append(kwargs["gguf_file"])
        return build_hf_model(len(build_tokenizer()))

    monkeypatch.setattr(AutoTokenizer, "from_pretrained", classmethod(tokenizer))
    monkeypatch.setattr(AutoModelForCausalLM, "from_pretrained", classmethod(model))
    monkeypatch.setenv("LLMAUDIT_CACHE", str(tmp_path / "cache"))
    gguf = tmp_path / "pkg" / "tiny.gguf"
    gguf.parent.mkdir()
    gguf.write_bytes(b"GGUF tiny")
    return gguf, conversions


@pytest.mark.parametrize("damage", [truncate, flip_last_byte])
def test_damaged_converted_weights_are_converted_again(fake_gguf, damage) -> None:
    gguf, conversions = fake_gguf
    folder, sha = load._embedded_folder(gguf)
    weights = Path(folder) / "model.safetensors"
    original = weights.read_bytes()
    assert load._embedded_folder(gguf) == (folder, sha) and len(conversions) == 1  # verified, reused
    damage(weights)
    with pytest.warns(UserWarning, match=str(weights.parent)):
        again = load._embedded_folder(gguf)
    assert again == (folder, sha) and len(conversions) == 2
    assert weights.read_bytes() == original  # what is loaded is again what the GGUF's sha256 names


# --- 8: one writer at a time ----------------------------------------------------------------------------------------


def write_rows(path: Path, chapter: str, count: int, start) -> None:
    """Record `count` rows of `chapter`, starting together with the other writer."""
    start.wait()
    results = Results(path)
    for i in range(count):
        results.record(chapter, f"row{i}", i)


def test_two_processes_recording_at_once_lose_no_row(tmp_path) -> None:
    context = multiprocessing.get_context("fork")
    start = context.Barrier(2)
    writers = [context.Process(target=write_rows, args=(tmp_path / "results.csv", f"w{i}", 200, start)) for i in (0, 1)]
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.join(120)
    assert [w.exitcode for w in writers] == [0, 0]
    assert len(Results(tmp_path / "results.csv").table()) == 400


def hold_folder(tmp_path: Path, started, release) -> None:
    """An audit whose first chapter waits until `release` (the first audit to start one holds it)."""
    def slow(chapter, params_file, report_dir, output, use_cache=True, progress=True, can=None):
        if not started.is_set():
            started.set()
            release.wait(60)
        return output

    audit.execute_chapter = slow
    os._exit(main(["audit", "ci", "--reports", str(tmp_path), "--chapter", "steering_vectors"]))


def test_second_audit_of_the_same_model_is_busy(tmp_path, ran, capsys) -> None:
    context = multiprocessing.get_context("fork")
    started, release = context.Event(), context.Event()
    holder = context.Process(target=hold_folder, args=(tmp_path, started, release))
    holder.start()
    try:
        assert started.wait(60)
        argv = ["audit", "ci", "--reports", str(tmp_path), "--chapter", "steering_vectors"]
        one_line_exit_2(capsys, argv, "busy", str(holder.pid))
    finally:
        release.set()
        holder.join(60)
    assert holder.exitcode == 0


def test_lock_of_a_dead_audit_is_taken_over(tmp_path, ran, capsys) -> None:
    dead = subprocess.Popen(["true"])
    dead.wait()
    (tmp_path / "ci").mkdir()
    (tmp_path / "ci" / audit.LOCK).write_text(str(dead.pid))
    assert main(["audit", "ci", "--reports", str(tmp_path), "--chapter", "steering_vectors"]) == 0
    assert len(ran) == 1


# --- 9: one audit, one folder -----------------------------------------------------------------------------------


def test_relative_reports_from_another_directory_stay_in_one_folder(tmp_path, ran, monkeypatch) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "mine.yaml").write_text((PARAMS_DIR / "ci.yaml").read_text())
    monkeypatch.chdir(elsewhere)
    assert main(["audit", "mine.yaml", "--reports", "out", "--chapter", "steering_vectors"]) == 0
    (chapter, params_file, report_dir, output), = ran
    folder = (elsewhere / "out" / "ci").resolve()
    assert (REPO / report_dir).resolve() == folder  # chapters run with cwd=REPO
    assert Path(params_file).is_absolute() and Path(params_file) == folder / "params" / "mine.yaml"  # its text, read
    assert Path(params_file).read_text() == (elsewhere / "mine.yaml").read_text()  # from the user's directory
    assert output.parent.resolve() == folder and (folder / "report.html").exists()


# --- 10: one line and exit status 2 -----------------------------------------------------------------------------


def test_params_path_is_a_directory(tmp_path, capsys) -> None:
    (tmp_path / "p.yaml").mkdir()
    one_line_exit_2(capsys, ["audit", str(tmp_path / "p.yaml")], str(tmp_path / "p.yaml"))


def test_params_file_is_binary(tmp_path, capsys) -> None:
    (tmp_path / "p.yaml").write_bytes(b"\x00\xff\xfe\x81name: x\n")
    one_line_exit_2(capsys, ["audit", str(tmp_path / "p.yaml")], str(tmp_path / "p.yaml"))


def test_unknown_chapter(tmp_path, capsys) -> None:
    one_line_exit_2(capsys, ["audit", "ci", "--reports", str(tmp_path), "--chapter", "nope"], "unknown chapter 'nope'")


def test_missing_chapter_source(tmp_path, ran, monkeypatch, capsys) -> None:
    monkeypatch.setattr(audit, "BOOK", tmp_path / "book")
    argv = ["audit", "ci", "--reports", str(tmp_path), "--chapter", "steering_vectors"]
    one_line_exit_2(capsys, argv, str(tmp_path / "book" / "01_steering_vectors.md"))
    assert not ran


def test_reports_folder_is_a_file(tmp_path, ran, capsys) -> None:
    (tmp_path / "file").write_text("")
    argv = ["audit", "ci", "--reports", str(tmp_path / "file"), "--chapter", "steering_vectors"]
    one_line_exit_2(capsys, argv, str(tmp_path / "file"))


def test_reports_folder_is_a_system_path(ran, capsys) -> None:
    one_line_exit_2(capsys, ["audit", "ci", "--reports", "/proc/llmaudit", "--chapter", "steering_vectors"], "/proc")


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_reports_folder_is_unwritable(tmp_path, ran, capsys) -> None:
    (tmp_path / "ro").mkdir(mode=0o500)
    one_line_exit_2(capsys, ["audit", "ci", "--reports", str(tmp_path / "ro"), "--chapter", "steering_vectors"], "ro")


def write_results(folder: Path) -> None:
    """A valid results file, so that the report and the index read the folder."""
    folder.mkdir(parents=True, exist_ok=True)
    Results(folder / "results.csv").record("steering_vectors", "corr", 0.5)


CORRUPT = {
    "results_binary": ("results.csv", b"\xff\xfe\x00\x81garbage"),
    "results_ragged": ("results.csv", b"chapter,name,value,lo,hi,unit,note,n\na,b,1,,,,,,extra,more\n"),
    "model_card": ("model_card.json", b'{"model": {"sha256": "ab'),
    "model_card_not_a_mapping": ("model_card.json", b"[1, 2]"),
    "model": ("model.json", b'{"source": '),
    "notebook": ("02_decision_tasks.ipynb", b'{"cells": [{"cell_type": "code", '),
    "notebook_not_json": ("02_decision_tasks.ipynb", b"\x00\x01\x02"),
    "similarity_answers": ("similarity/answers.csv", b"\xff\xfe\x00\x81garbage"),
    "similarity_columns": ("similarity/answers.csv", b"a,b\n1,2\n"),
    "provenance_edited": ("provenance/decision_tasks.json", b'{"settings": {"seed": 1}, "sha256": "ab"}'),
    "provenance_of_no_chapter": ("provenance/evil.json", b"{}"),
}


@pytest.mark.parametrize("case", CORRUPT)
def test_corrupt_report_file(tmp_path, ran, capsys, case) -> None:
    name, content = CORRUPT[case]
    folder = tmp_path / "ci"
    write_results(folder)
    if name.startswith("similarity/"):
        save_systems(folder, answers("ci", [0, 2], [0, 4]), {"ci|1": torch.ones(2, 3)})
    elif name != "results.csv":
        audit.run_audit("ci", tmp_path, ["steering_vectors"])  # a card and a model description to damage
        (folder / "model.json").write_text('{"source": "x"}')
    (folder / name).parent.mkdir(exist_ok=True)
    (folder / name).write_bytes(content)
    argv = ["audit", "ci", "--reports", str(tmp_path), "--chapter", "steering_vectors"]
    one_line_exit_2(capsys, argv, str(folder / name))


def test_truncated_similarity_representations(tmp_path, ran, capsys) -> None:
    folder = tmp_path / "ci"
    write_results(folder)
    save_systems(folder, answers("ci", [0, 2], [0, 4]), {"ci|1": torch.ones(2, 3)})
    truncate(folder / "similarity" / "representations.safetensors")
    argv = ["audit", "ci", "--reports", str(tmp_path), "--chapter", "steering_vectors"]
    one_line_exit_2(capsys, argv, str(folder / "similarity" / "representations.safetensors"), "similarity chapter")


FAKE_CHAPTER = textwrap.dedent(
    """\
    ---
    jupyter:
      kernelspec: {name: python3, display_name: Python 3, language: python}
    ---

    ```python tags=["parameters"]
    params_file = "ci"
    report_dir = "reports/ci"
    use_cache = True
    ```

    ```python
    from llmaudit.runner.chapter import Chapter, open_chapter

    chapter = open_chapter("decision_tasks", params_file, report_dir, use_cache)
    chapter.vector("gender_lang")
    ```
    """
)


def test_altered_saved_vector_stops_the_chapter_with_one_line(tmp_path, monkeypatch, capsys) -> None:
    """A real kernel runs a chapter that reads an altered vector."""
    monkeypatch.setattr(audit, "BOOK", tmp_path / "book")
    (tmp_path / "book").mkdir()
    (tmp_path / "book" / "02_decision_tasks.md").write_text(FAKE_CHAPTER)
    path = saved_vector(tmp_path / "reports" / "ci" / "vectors")
    flip_last_byte(path)
    argv = ["audit", "ci", "--reports", str(tmp_path / "reports"), "--chapter", "decision_tasks"]
    assert main(argv) == 2
    lines = capsys.readouterr().err.splitlines()
    errors = [line for line in lines if line.strip() and not PROGRESS.match(line)]
    assert len(errors) == 1 and "chapter decision_tasks failed" in errors[0], errors
    assert str(path) in errors[0] and "rerun the steering_vectors chapter" in errors[0]


def test_disk_failure_while_writing_is_one_line(tmp_path, ran, monkeypatch, capsys) -> None:
    def full(reports, own=None):
        raise OSError(28, "No space left on device", str(reports / "index.html"))

    monkeypatch.setattr(audit, "build_index", full)
    argv = ["audit", "ci", "--reports", str(tmp_path), "--chapter", "steering_vectors"]
    one_line_exit_2(capsys, argv, str(tmp_path / "index.html"), "No space left on device")


# --- 11: nothing printed to a terminal or written as XML carries a raw control character ----------------------------

CONTROL = "\x1b[2J\x1b]0;pwned\x07\r\n\u202e"  # clear the screen, retitle the terminal, rewind, a new line, bidi


def test_error_line_escapes_control_characters_of_a_params_key(tmp_path, capsys) -> None:
    """The old error line printed the key as it was: a key "seed\\nTraceback..." gave three lines."""
    params = tmp_path / "p.yaml"
    hostile_key = '"seed\\nTraceback (most recent call last):\\n\\x1b[2J": 1\n'
    params.write_text((PARAMS_DIR / "ci.yaml").read_text() + hostile_key)
    line = one_line_exit_2(capsys, ["audit", str(params)], "seed\\nTraceback", "\\x1b[2J")
    assert "\x1b" not in line


def test_error_line_escapes_a_model_name_from_the_command_line(capsys) -> None:
    """The old error line for `audit $'ci\\nx'` was two lines."""
    assert "\r" not in one_line_exit_2(capsys, ["audit", f"ci{CONTROL}x"], "unknown model", "ci\\x1b[2J")


def test_compare_table_escapes_case_file_strings(tmp_path, capsys) -> None:
    """The old `compare` printed the case files' test names as they were."""
    from test_comparison import audited, case_records, per_unit

    test = f"credit.blackbox_explicit{CONTROL}x"
    for name, mean in (("a", 0.3), ("b", 0.0)):
        audited(tmp_path, name, case_records(per_unit(mean, 30, 1), test))
    assert main(["compare", "a", "b", "--reports", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert not any(_unsafe(char) for char in out.replace("\n", "")) and "x1b[2J" in out
    assert len([line for line in out.splitlines() if "blackbox_explicit" in line]) == 1


def test_comparisons_of_different_pairs_write_different_files(tmp_path, capsys) -> None:
    """The old `compare x_vs_y z` and `compare x y_vs_z` both wrote compare/x_vs_y_vs_z.json: the second replaced
    the first."""
    from test_comparison import audited, case_records, per_unit

    for number, name in enumerate(("x_vs_y", "z", "x", "y_vs_z"), 1):
        audited(tmp_path, name, case_records(per_unit(0.1 * number, 30, number)))
    assert main(["compare", "x_vs_y", "z", "--reports", str(tmp_path)]) == 0
    assert main(["compare", "x", "y_vs_z", "--reports", str(tmp_path)]) == 0
    written = (json.loads(p.read_text()) for p in (tmp_path / "compare").glob("*.json"))
    pairs = {(data["a"], data["b"]) for data in written}
    assert pairs == {("x_vs_y", "z"), ("x", "y_vs_z")}


def test_verdict_junit_stays_well_formed_under_a_hostile_folder_name(tmp_path, capsys) -> None:
    """The old JUnit writer put the folder name's control characters into the XML, which no parser then read."""
    import shutil
    import xml.etree.ElementTree as ET

    from test_verdict_gate import report

    folder = tmp_path / f"m{CONTROL.replace(chr(13), '')}"
    shutil.copytree(report(tmp_path, (0.0, -0.01, 0.01)), folder)
    junit = tmp_path / "verdicts.xml"
    assert main(["verdict", str(folder), "--junit", str(junit)]) == 0
    root = ET.parse(junit).getroot()
    assert root.get("name").startswith("llmaudit m\\x1b[2J") and not any(_unsafe(c) for c in root.get("name"))
    assert not any(_unsafe(char) for char in capsys.readouterr().out.replace("\n", ""))


# --- 12: an internal error is one line too, with its own exit status ------------------------------------------------


def test_uncaught_exception_is_one_line_with_exit_status_4(tmp_path, ran, monkeypatch, capsys) -> None:
    """The old command line let it through as a traceback (exit status 1, which `verdict` uses for a failed
    requirement)."""
    def broken(reports, own=None):
        raise KeyError("a bug\nsecond line")

    monkeypatch.setattr(audit, "build_index", broken)
    code = main(["audit", "ci", "--reports", str(tmp_path), "--chapter", "steering_vectors"])
    lines = [line for line in capsys.readouterr().err.strip().splitlines() if not PROGRESS.match(line)]
    assert code == 4 and len(lines) == 1 and "internal error: KeyError" in lines[0], lines


# --- 13: every report file is written whole or not at all, with one mode --------------------------------------------


def test_every_report_file_is_replaced_atomically_with_one_mode(tmp_path, ran, monkeypatch) -> None:
    """The old code wrote model_card.json, model.json, results.json, the index pages and the report in place
    (a crash left half a file), and results.csv with mkstemp's mode 0600 beside the others' 0644."""
    replaced = []
    real = os.replace

    def replace(source, target):
        replaced.append(Path(target).name)
        real(source, target)

    write_results(tmp_path / "ci")
    card.write_model(tmp_path / "ci", {"source": "x"})
    monkeypatch.setattr(os, "replace", replace)
    assert main(["audit", "ci", "--reports", str(tmp_path), "--chapter", "steering_vectors"]) == 0
    card.write_model(tmp_path / "ci", {"source": "x"})
    written = {"model_card.json", "model.json", "results.json", "report.html", "index.md", "index.html"}
    assert written <= set(replaced), written - set(replaced)
    files = [p for p in tmp_path.rglob("*") if p.is_file() and not p.name.startswith(".")]
    assert {p.name for p in files} >= written | {"results.csv"}
    assert {p.relative_to(tmp_path).as_posix(): oct(p.stat().st_mode & 0o777) for p in files} == {
        p.relative_to(tmp_path).as_posix(): oct(0o644) for p in files}


# --- 14: numbers read back from a report folder are checked ---------------------------------------------------------

DAMAGED_VALUES = {  # the old readers took each of these: a nan bound dropped the test, the others broke or poisoned
    "nan_bound": ("lo", "nan", "lo 'nan' is not a finite number"),
    "inf_bound": ("hi", "inf", "hi 'inf' is not a finite number"),
    "text_bound": ("lo", "abc", "lo 'abc' is not a finite number"),
    "fractional_n": ("n", "1.5", "n '1.5' is not a positive integer"),
    "zero_n": ("n", "0", "n '0' is not a positive integer"),
    "inf_value": ("value", "-inf", "value '-inf' is infinite"),
}


@pytest.mark.parametrize("case", DAMAGED_VALUES)
def test_damaged_results_values_name_the_file_and_row(tmp_path, capsys, case) -> None:
    from test_verdict_gate import report

    column, text, problem = DAMAGED_VALUES[case]
    folder = report(tmp_path, (0.0, -0.01, 0.01))
    path = folder / "results.csv"
    lines = path.read_text().splitlines()
    row = next(i for i, line in enumerate(lines) if "credit.whitebox_slope" in line)
    fields = lines[row].split(",")
    fields[["chapter", "name", "value", "lo", "hi", "unit", "note", "n"].index(column)] = text
    lines[row] = ",".join(fields)
    path.write_text("\n".join(lines) + "\n")
    one_line_exit_2(capsys, ["verdict", str(folder)], str(path), f"row {row}", "credit.whitebox_slope", problem)


@pytest.mark.parametrize("epsilon", [-1, 0, "0.02", None, True, 1.0e300, {"slope": 1.0e300}, {"slope": 0},
                                     {"slop": 0.02}, {"gap": "0.02"}])
def test_card_epsilon_must_be_a_positive_number(tmp_path, capsys, epsilon) -> None:
    """The old reader took a card epsilon of -1, which fails every test, and one of 1e300, which passes them all."""
    from test_verdict_gate import report

    folder = report(tmp_path, (0.0, -0.01, 0.01))
    (folder / "model_card.json").write_text(json.dumps({"params": {"epsilon": epsilon}}))
    one_line_exit_2(capsys, ["verdict", str(folder)], str(folder / "model_card.json"), "params.epsilon")


def test_non_finite_bounds_are_not_recorded(tmp_path) -> None:
    with pytest.raises(ValueError, match="finite"):
        Results(tmp_path / "results.csv").record("decision_tasks", "x", 0.1, float("nan"), 0.2)


# --- 15: every file of a report folder is read through its checked reader -------------------------------------------


@pytest.fixture
def no_hang():
    """Fail a test whose reader blocks (on a FIFO) instead of hanging the run: the alarm interrupts the open."""
    import signal

    class Hung(BaseException):  # no reader's except clause may take it for a damaged file (TimeoutError is an OSError)
        pass

    def hung(signum, frame):
        signal.alarm(20)  # and again for the next blocking open
        raise Hung("the reader blocked on a file")

    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(20)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


@pytest.mark.parametrize("epsilon", [-1, 0])
def test_compare_reads_the_card_epsilon_as_the_verdicts_do(tmp_path, capsys, epsilon) -> None:
    """The old `compare` read the card's epsilon itself and took 0, which no interval can lie within."""
    from test_comparison import audited, case_records, per_unit

    for number, name in enumerate(("a", "b"), 1):
        folder = audited(tmp_path, name, case_records(per_unit(0.0, 30, number)))
        (folder / "model_card.json").write_text(json.dumps({"params": {"epsilon": epsilon}}))
    one_line_exit_2(capsys, ["compare", "a", "b", "--reports", str(tmp_path)],
                    str(tmp_path / "a" / "model_card.json"), "params.epsilon")


WRONG_CARDS = {  # each gave the old verdict a KeyError, TypeError or pydantic ValidationError traceback (exit 1 or 4)
    "params_a_list": ({"params": []}, "params"),
    "no_epsilon": ({"params": {"seed": 0}}, "params.epsilon"),
    "gate_text": ({"params": {"epsilon": 0.02, "gates": {"vector_corr": "high"}}}, "params.gates.vector_corr"),
    "gates_a_list": ({"params": {"epsilon": 0.02, "gates": [0.2]}}, "params.gates"),
    "unknown_gate": ({"params": {"epsilon": 0.02, "gates": {"vector_cor": 0.2}}}, "params.gates.vector_cor"),
    "gate_out_of_range": ({"params": {"epsilon": 0.02, "gates": {"vector_corr": 5}}}, "params.gates"),
    "wall_text": ({"params": {"epsilon": 0.02}, "wall_seconds": {"decision_tasks": "1 min"}}, "wall_seconds"),
}


@pytest.mark.parametrize("case", WRONG_CARDS)
def test_card_fields_of_the_wrong_type_are_one_line(tmp_path, capsys, case) -> None:
    from test_verdict_gate import report

    content, where = WRONG_CARDS[case]
    folder = report(tmp_path, (0.0, -0.01, 0.01))
    (folder / "model_card.json").write_text(json.dumps(content))
    one_line_exit_2(capsys, ["verdict", str(folder)], str(folder / "model_card.json"), f"({where}")


def sibling(reports: Path, name: str) -> Path:
    """A report folder reports/<name> that the verdicts and the index read (test_verdict_gate's passing one)."""
    from test_verdict_gate import report

    reports.mkdir(exist_ok=True)
    return report(reports / f".{name}", (0.0, -0.01, 0.01)).rename(reports / name)


def left_out(reports: Path, own: str) -> str:
    """The index built for `own` (which must still be in it): its HTML page."""
    from llmaudit.report.audited import read_audited
    from llmaudit.report.index import build_index

    build_index(reports, own=read_audited(reports / own))
    page = (reports / "index.html").read_text()
    assert f'<a href="{own}/report.html">{own}</a>' in page
    return page


def test_a_fifo_in_a_sibling_folder_is_left_out_without_blocking(tmp_path, no_hang) -> None:
    """The old index opened a FIFO as a sibling's model_card.json or results.csv and waited for a writer."""
    reports = tmp_path / "reports"
    sibling(reports, "own")
    for name in ("model_card.json", "results.csv"):
        path = sibling(reports, name.split(".")[0]) / name
        path.unlink()
        os.mkfifo(path)
    page = left_out(reports, "own")
    assert "Left out: model_card: " in page and "Left out: results: " in page
    assert page.count("is not a regular file") == 2


@pytest.mark.parametrize("name", ["answers.csv", "representations.safetensors"])
def test_a_fifo_among_a_siblings_similarity_files_is_left_out_without_blocking(tmp_path, no_hang, name) -> None:
    """The old loader opened a FIFO as a sibling's similarity answers or representations and waited for a writer."""
    from llmaudit.chapters.similarity.across import similarity_charts

    reports = tmp_path / "reports"
    for model in ("own", "other"):
        save_systems(reports / model, answers(model, [0, 2], [0, 4]), {f"{model}|1": torch.randn(2, 3)})
    path = reports / "other" / "similarity" / name
    path.unlink()
    os.mkfifo(path)
    charts, skipped = similarity_charts(reports, ["own", "other"], own="own")
    assert charts and len(skipped) == 1 and "other: " in skipped[0] and "regular file" in skipped[0]


DAMAGED_CASES = {  # the old reader took both: a list as a group, and 1e400 (read as inf) as a unit's value
    "group_a_list": ('"group": "female"', '"group": ["female", "male"]', "field group holds a value that is not text"),
    "value_1e400": ('"value": 0.', '"value": 1e400, "x": 0.', "field value holds a value that is neither a finite"),
}


@pytest.mark.parametrize("case", DAMAGED_CASES)
def test_damaged_case_records_are_one_line(tmp_path, capsys, case) -> None:
    from test_comparison import audited, case_records, per_unit

    old, new, problem = DAMAGED_CASES[case]
    for number, name in enumerate(("a", "b"), 1):
        audited(tmp_path, name, case_records(per_unit(0.0, 30, number)))
    path = tmp_path / "a" / "cases" / "decision_tasks.jsonl"
    lines = path.read_text().splitlines()
    assert old in lines[0]
    path.write_text("\n".join([lines[0].replace(old, new, 1), *lines[1:]]) + "\n")
    one_line_exit_2(capsys, ["compare", "a", "b", "--reports", str(tmp_path)], str(path), "line 1", problem)


@pytest.mark.parametrize("ledger", ['{"blocks": Infinity, "actual": 1, "minimum": 1}',
                                    '{"blocks": 2, "actual": 1e400, "minimum": 1}',
                                    '{"blocks": 2, "actual": 1, "minimum": 1, "calls": {"x": {"actual": 1, '
                                    '"minimum": 1, "seconds": Infinity}}}'])
def test_a_damaged_ledger_is_left_out_of_the_card(tmp_path, ran, ledger) -> None:
    """The old card writer stopped the audit with an OverflowError traceback on an inf count; the ledger reports on
    cost and never decides a result, so a damaged one is left out."""
    from llmaudit.ledger import read_calls

    (tmp_path / "ci" / "ledger").mkdir(parents=True)
    (tmp_path / "ci" / "ledger" / "decision_tasks.json").write_text(ledger)
    assert main(["audit", "ci", "--reports", str(tmp_path), "--chapter", "steering_vectors"]) == 0
    assert json.loads((tmp_path / "ci" / "model_card.json").read_text())["compute"] == {}
    assert read_calls(tmp_path / "ci") == {}


def test_a_sibling_with_bad_gates_or_representation_keys_is_left_out_of_the_index(tmp_path) -> None:
    """The old index step crashed for every model on a sibling's card gate of the wrong type (ValidationError) or a
    representation key without '|' (IndexError)."""
    reports = tmp_path / "reports"
    sibling(reports, "own")
    gates = sibling(reports, "gates") / "model_card.json"
    gates.write_text(json.dumps({"params": {"epsilon": 0.02, "gates": {"vector_corr": "x"}}}))
    save_systems(sibling(reports, "keys"), answers("keys", [0, 2], [0, 4]), {"keys": torch.ones(2, 3)})
    page = left_out(reports, "own")
    assert "Left out: gates: " in page and "params.gates.vector_corr" in page
    assert "Left out: keys: " in page and "not named &#x27;system|depth&#x27;" in page


def test_an_oversized_report_file_is_refused_before_it_is_read(tmp_path) -> None:
    from llmaudit.errors import DataError
    from llmaudit.reading import read_text

    path = tmp_path / "results.csv"
    path.write_text("x" * 17)
    assert read_text(path, "fix it", limit=17) == "x" * 17
    with pytest.raises(DataError, match=r"results.csv holds 17 bytes, more than a report file may \(16\): fix it"):
        read_text(path, "fix it", limit=16)


def test_vectors_and_similarity_files_are_written_whole_with_the_report_mode(tmp_path) -> None:
    """safetensors' own writer left vectors and representations 0600, and wrote them in place (a crash mid-write left
    half a file where the old one had been)."""
    from llmaudit.models.vector import SteeringVector

    direction = torch.nn.functional.normalize(torch.ones(4), dim=0)
    vector = SteeringVector("v", "gender", 1, direction, torch.zeros(4), k=1.0)
    written = [vector.save(tmp_path / "vectors")]
    save_systems(tmp_path, answers("ci", [0, 2], [0, 4]), {"ci|1": torch.randn(2, 3)},
                 pd.DataFrame({"id": ["x"], "bias_type": "race", "system": "ci", "choice": ["stereotype"]}))
    written += sorted((tmp_path / "similarity").iterdir())
    assert [oct(path.stat().st_mode & 0o777) for path in written] == ["0o644"] * 4
    assert not list(tmp_path.rglob("*.partial"))
    assert SteeringVector.load(written[0]).layer == 1
