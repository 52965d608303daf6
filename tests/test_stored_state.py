"""Stored state bound to what it claims to be (issue 46): a cache entry to its key, a saved vector to the vector a
chapter asks for, the model card to the params text the chapters ran; and identical runs write identical bytes."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import nbformat
import papermill
import pytest
import torch
from safetensors.torch import save_file

from llmaudit.cache import cached_tensors, digest, store_tensors
from llmaudit.chapters.steering_vectors import SteeringVector
from llmaudit.cli import main
from llmaudit.config import PARAMS_DIR
from llmaudit.errors import AuditError
from llmaudit.report import card
from llmaudit.runner.chapter import open_chapter
from test_hostile_state import MODEL, known_model, saved_vector

# --- 1: a cache entry is its key's ----------------------------------------------------------------------------------


def entry(folder: Path, key: dict) -> Path:
    """The file a key's entry is stored in."""
    return folder / f"{digest(key)}.safetensors"


def computing(value: dict[str, torch.Tensor]):
    """A compute function returning `value`, with the list of its calls."""
    calls: list[int] = []

    def compute() -> dict[str, torch.Tensor]:
        calls.append(1)
        return value

    return compute, calls


ASKED = {"prompts": ["a"], "result": "probs"}
OTHER = {"prompts": ["b"], "result": "probs"}
PROBS = {"probs": torch.arange(12.0).reshape(3, 4)}


@pytest.mark.parametrize("other", [{"probs": torch.full((3, 4), 9.0)},  # same dtype and shape: used silently before
                                   {"slope0": torch.ones(5)}],  # another shape, no 'probs': KeyError before
                         ids=["same-shape", "other-shape"])
def test_an_entry_moved_onto_another_keys_name_is_recomputed_with_a_warning(tmp_path, other) -> None:
    store_tensors(tmp_path, OTHER, other)
    entry(tmp_path, OTHER).rename(entry(tmp_path, ASKED))  # the swap the issue made among 51 of 81 entries
    compute, calls = computing(PROBS)
    with pytest.warns(UserWarning, match=f"cache entry .*{entry(tmp_path, ASKED).name} holds the result of another"):
        found = cached_tensors(tmp_path, ASKED, compute)
    assert calls == [1] and torch.equal(found["probs"], PROBS["probs"])
    assert torch.equal(cached_tensors(tmp_path, ASKED, compute)["probs"], PROBS["probs"]) and calls == [1]


def malformed(path: Path) -> None:
    """Rewrite an entry as another program would: valid tensors and checksum-like metadata, no llmaudit header."""
    save_file({"probs": torch.zeros(3, 4)}, path, metadata={"sha256": "0" * 64})


def not_json(path: Path) -> None:
    """Rewrite an entry with a header that is not JSON."""
    save_file({"probs": torch.zeros(3, 4)}, path, metadata={"llmaudit": "{damaged"})


@pytest.mark.parametrize("damage", [malformed, not_json])
def test_a_malformed_entry_is_recomputed_with_a_warning_naming_it(tmp_path, damage) -> None:
    store_tensors(tmp_path, ASKED, PROBS)
    damage(entry(tmp_path, ASKED))
    compute, calls = computing(PROBS)
    with pytest.warns(UserWarning, match=f"{entry(tmp_path, ASKED).name} has no llmaudit header"):
        found = cached_tensors(tmp_path, ASKED, compute)
    assert calls == [1] and torch.equal(found["probs"], PROBS["probs"])


# --- 2: a saved vector is the vector asked for ----------------------------------------------------------------------


def chapter_reading(folder: Path, monkeypatch):
    """The decision-tasks chapter of a ci audit in `folder`, its model `MODEL`."""
    known_model(monkeypatch)
    return open_chapter("decision_tasks", "ci", str(folder), False)


@pytest.mark.parametrize(("saved", "problem"), [
    (dict(name="race_dial", concept="race"), "name 'race_dial', not 'gender_lang'; concept 'race', not 'gender'"),
    (dict(weights="another model"), "weights 'another model', not 'f00d'"),
    (dict(model="smollm2-135m-instruct"), "model 'smollm2-135m-instruct', not 'ci'"),
], ids=["other-vector", "other-weights", "other-model"])
def test_a_valid_vector_that_is_not_the_one_asked_for_is_one_line(tmp_path, monkeypatch, saved, problem) -> None:
    """`cp vectors/race_dial.safetensors vectors/gender_lang.safetensors` was used silently."""
    source = saved_vector(tmp_path / "elsewhere", **saved)
    path = tmp_path / "vectors" / "gender_lang.safetensors"
    path.parent.mkdir()
    shutil.copy(source, path)
    with pytest.raises(AuditError) as info:
        chapter_reading(tmp_path, monkeypatch).vector("gender_lang")
    message = str(info.value)
    assert "\n" not in message and str(path) in message and problem in message
    assert message.endswith("rerun the steering_vectors chapter to save it again")


def test_a_vector_at_another_block_than_the_steering_chapter_chose_is_refused(tmp_path, monkeypatch) -> None:
    saved_vector(tmp_path / "vectors")  # block 2
    chapter = chapter_reading(tmp_path, monkeypatch)
    assert chapter.vector("gender_lang").layer == 2
    chapter.results.record("steering_vectors", "gender_lang.block", 3)
    chapter.results.commit("steering_vectors")
    with pytest.raises(AuditError, match="block 2, not 3"):
        chapter.vector("gender_lang")
    monkeypatch.setattr(MODEL, "width", 16)
    with pytest.raises(AuditError, match=r"width \(8,\), not \(16,\)"):
        chapter.vector("gender_lang")


def test_a_swapped_vector_stops_the_audit_with_one_line(tmp_path, monkeypatch, capsys) -> None:
    folder = tmp_path / "reports" / "ci"
    source = saved_vector(tmp_path / "elsewhere", name="race_dial", concept="race")
    (folder / "vectors").mkdir(parents=True)
    shutil.copy(source, folder / "vectors" / "gender_lang.safetensors")

    def execute_notebook(source, output, parameters, **kwargs):
        open_chapter("decision_tasks", parameters["params_file"], parameters["report_dir"], False).vector("gender_lang")

    monkeypatch.setattr(papermill, "execute_notebook", execute_notebook)
    known_model(monkeypatch)
    assert main(["audit", "ci", "--reports", str(tmp_path / "reports"), "--chapter", "decision_tasks"]) == 2
    lines = [line for line in capsys.readouterr().err.splitlines() if not line.startswith("[")]
    assert len(lines) == 1 and "is not the vector 'gender_lang' of ci (name 'race_dial'" in lines[0], lines


# --- 3: the card keeps the params text the chapters ran ------------------------------------------------------------


def editing_chapters(monkeypatch, params: Path, edited: str | None) -> list[int]:
    """papermill replaced by chapters that record one row each; the first rewrites `params` as `edited` (None:
    removes it) while it runs. Returns the seed each chapter ran with."""
    seeds = []

    def execute_notebook(source, output, parameters, **kwargs):
        name = Path(source).stem.split("_", 1)[1]
        chapter = open_chapter(name, parameters["params_file"], parameters["report_dir"], False)
        if not seeds:
            params.write_text(edited) if edited is not None else params.unlink()
        seeds.append(chapter.params.seed)
        chapter.record("gender_lang.block" if name == "steering_vectors" else "credit.blackbox_explicit", 1.0)
        nbformat.write(nbformat.v4.new_notebook(), output)

    monkeypatch.setattr(papermill, "execute_notebook", execute_notebook)
    monkeypatch.setattr(card, "_git_commit", lambda: None)
    return seeds


@pytest.mark.parametrize("edit", [lambda text: text.replace("seed: 0", "seed: 7").replace("bootstrap: 200",
                                                                                           "bootstrap: 100000"),
                                  lambda text: text[: len(text) // 2],  # half-written: exit 4 before
                                  lambda text: None],
                         ids=["edited", "half-written", "removed"])
def test_a_params_file_edited_during_the_audit_is_one_note_and_the_card_keeps_the_text_that_ran(
        tmp_path, monkeypatch, capsys, edit) -> None:
    original = (PARAMS_DIR / "ci.yaml").read_text()
    params = tmp_path / "ci.yaml"
    params.write_text(original)
    seeds = editing_chapters(monkeypatch, params, edit(original))
    argv = ["audit", str(params), "--reports", str(tmp_path / "reports"), "--chapter", "steering_vectors",
            "--chapter", "decision_tasks"]
    assert main(argv) == 0
    assert seeds == [0, 0]  # every chapter ran the text read at the start
    notes = [line for line in capsys.readouterr().err.splitlines() if line.startswith("note:")]
    assert len(notes) == 1 and f"params file {params} changed during this audit" in notes[0], notes
    folder = tmp_path / "reports" / "ci"
    sha = hashlib.sha256(original.encode()).hexdigest()
    recorded = json.loads((folder / "model_card.json").read_text())["params"]
    assert (recorded["text"], recorded["sha256"], recorded["seed"]) == (original, sha, 0)
    config = json.loads((folder / "results.json").read_text())["config"]
    assert (config["text"], config["sha256"]) == (original, sha)
    assert sha[:16] in (folder / "report.html").read_text()


def test_an_unchanged_params_file_gives_no_note(tmp_path, monkeypatch, capsys) -> None:
    params = tmp_path / "ci.yaml"
    params.write_text((PARAMS_DIR / "ci.yaml").read_text())
    editing_chapters(monkeypatch, params, params.read_text())
    assert main(["audit", str(params), "--reports", str(tmp_path / "reports"), "--chapter", "decision_tasks"]) == 0
    assert "note:" not in capsys.readouterr().err


# --- 5: identical runs, identical bytes -----------------------------------------------------------------------------


def test_the_same_vector_and_cache_entry_are_saved_as_the_same_bytes(tmp_path) -> None:
    """safetensors writes its metadata map in an order that varies between calls: with two entries, a vector saved
    again had a new sha256 and the chapters that read it were told to rerun."""
    vectors = {saved_vector(tmp_path / str(i)).read_bytes() for i in range(16)}
    for i in range(16):
        store_tensors(tmp_path / f"cache{i}", ASKED, PROBS)
    entries = {entry(tmp_path / f"cache{i}", ASKED).read_bytes() for i in range(16)}
    assert len(vectors) == 1 and len(entries) == 1
    loaded = SteeringVector.load(saved_vector(tmp_path / "again"))
    assert (loaded.name, loaded.layer, loaded.k, loaded.meta) == ("gender_lang", 2, 0.5, {"model": "ci",
                                                                                           "weights": "f00d"})


VECTORS = [("gender_lang", "gender"), ("race_dial", "race"), ("race_id", "race"), ("gender_id", "gender")]
RUN_DEPENDENT = {"model_card.json": ("generated", "wall_seconds"), "results.json": ("date",)}  # when, how long


def report_files(folder: Path) -> dict[str, bytes]:
    """Every file of a report folder but the lock and the report page (which shows the run's date), with the
    run-dependent fields of the card and results.json left out."""
    found = {}
    for path in sorted(p for p in folder.rglob("*") if p.is_file() and p.name not in (".audit.lock", "report.html")):
        data = path.read_bytes()
        if path.name in RUN_DEPENDENT:
            document = json.loads(data)
            document.update(dict.fromkeys(RUN_DEPENDENT[path.name]))
            data = json.dumps(document).encode()
        found[str(path.relative_to(folder))] = data
    return found


def test_a_steering_rerun_writes_identical_bytes_and_no_rerun_notes(tmp_path, monkeypatch, capsys) -> None:
    """The steering chapter's writers (vectors, rows, settings, card, results.json) run again over the same params,
    after the decision-tasks chapter read its vectors: false 'rerun it' notes and a changed results.json before."""

    def execute_notebook(source, output, parameters, **kwargs):
        name = Path(source).stem.split("_", 1)[1]
        chapter = open_chapter(name, parameters["params_file"], parameters["report_dir"], False)
        for i, (vector, concept) in enumerate(VECTORS):
            if name == "steering_vectors":
                saved_vector(chapter.vectors_dir, vector, concept, corr=0.1 * i, band=[-1.0, 1.0])
                chapter.record(f"{vector}.block", 2)
            else:
                chapter.vector(vector)
        if name == "decision_tasks":
            chapter.record("credit.blackbox_explicit", 1.0)
        nbformat.write(nbformat.v4.new_notebook(), output)

    monkeypatch.setattr(papermill, "execute_notebook", execute_notebook)
    monkeypatch.setattr(card, "_git_commit", lambda: None)
    known_model(monkeypatch)
    argv = ["audit", "ci", "--reports", str(tmp_path / "reports"), "--chapter", "steering_vectors"]
    assert main([*argv, "--chapter", "decision_tasks"]) == 0
    assert main(argv) == 0
    first = report_files(tmp_path / "reports" / "ci")
    assert main(argv) == 0
    again = report_files(tmp_path / "reports" / "ci")
    assert [name for name in first.keys() | again.keys() if first.get(name) != again.get(name)] == []
    assert "note:" not in capsys.readouterr().err
