"""Each chapter's tensor cache is named by the hash of its own code (its computing packages, those of the chapters
whose passes it reads, the model layer and the entry format), over the code's syntax without docstrings or
comments: an edit that changes no code keeps every cached pass, an edit of one chapter keeps the others', and a
chapter reads another's passes only where its own hash covers the code that computed them."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch

from llmaudit import cache
from llmaudit.cache import TensorCache, cached_tensors, code_version
from llmaudit.config import load_params
from llmaudit.registry import CHAPTERS, KEYS, cache_packages, reused
from llmaudit.runner.chapter import Chapter

EVALUATE = Path("chapters", "decision_tasks", "evaluate.py")
OTHER = Path("chapters", "markedness", "metrics.py")
FUTURE = "from __future__ import annotations\n"
CODE_EDIT = (FUTURE, FUTURE + "\nLIMIT = 1\n")  # one more statement: a change of code


@pytest.fixture
def package(tmp_path, monkeypatch) -> Path:
    """A copy of the llmaudit package whose code the hashes read, for a test to edit; the hashes start afresh."""
    copy = tmp_path / "llmaudit"
    shutil.copytree(cache.PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(cache, "PACKAGE", copy)
    code_version.cache_clear()
    yield copy
    code_version.cache_clear()


def edited(package: Path, path: Path, old: str, new: str) -> None:
    """Replace the first `old` in a module of the copy by `new`; the hashes are worked out again."""
    source = (package / path).read_text(encoding="utf-8")
    assert old in source, f"{path} no longer holds {old!r}: pick another edit"
    (package / path).write_text(source.replace(old, new, 1), encoding="utf-8")
    code_version.cache_clear()


def folder(tmp_path: Path, key: str) -> Path:
    """Where chapter `key` of an audit in `tmp_path` caches its passes."""
    found = Chapter(key, load_params("ci"), tmp_path / "report").cache
    assert found is not None
    return found.folder


def test_docstring_and_comment_edits_keep_the_cached_passes(package, tmp_path) -> None:
    calls = []

    def compute():
        calls.append(1)
        return {"probs": torch.arange(3.0)}

    before = folder(tmp_path, "decision_tasks")
    cached_tensors(before, {"prompts": ["a"]}, compute)
    source = (package / EVALUATE).read_text(encoding="utf-8")
    docstring = source.split('"""')[1]
    edited(package, EVALUATE, docstring, "Another docstring,\nover two lines.")
    edited(package, EVALUATE, FUTURE, "# a new comment\n\n" + FUTURE)
    assert folder(tmp_path, "decision_tasks") == before
    assert torch.equal(cached_tensors(folder(tmp_path, "decision_tasks"), {"prompts": ["a"]}, compute)["probs"],
                       torch.arange(3.0)) and calls == [1]
    edited(package, EVALUATE, *CODE_EDIT)
    assert folder(tmp_path, "decision_tasks") != before
    cached_tensors(folder(tmp_path, "decision_tasks"), {"prompts": ["a"]}, compute)
    assert calls == [1, 1]


def test_json_layout_keeps_the_hash_and_its_data_does_not(package) -> None:
    manifest = Path("data", "manifest.json")
    before = code_version(("data",))
    edited(package, manifest, "{", "{\n    ")
    assert code_version(("data",)) == before
    edited(package, manifest, '"', '"x')
    assert code_version(("data",)) != before


@pytest.mark.parametrize("part", [EVALUATE, Path("models", "ask.py"), Path("sealed.py")], ids=str)
def test_a_code_edit_of_a_chapters_computing_code_changes_its_folder(package, tmp_path, part) -> None:
    before = folder(tmp_path, "decision_tasks")
    edited(package, part, *CODE_EDIT)
    assert folder(tmp_path, "decision_tasks") != before


def test_an_edit_of_another_chapters_package_keeps_a_chapters_folder(package, tmp_path) -> None:
    before = {key: folder(tmp_path, key) for key in KEYS}
    edited(package, OTHER, *CODE_EDIT)
    after = {key: folder(tmp_path, key) for key in KEYS}
    assert [key for key in KEYS if after[key] != before[key]] == ["markedness"]


def test_a_chapter_reads_the_passes_of_the_chapters_it_repeats_and_no_others(tmp_path) -> None:
    """The robustness chapter's main-vector and black-box passes are the decision tasks' (its notebook says they come
    from their cache), and the validity chapter's audits are the robustness chapter's: each reads them where the
    earlier chapter stored them; a chapter that repeats none reads only its own folder."""
    stored = {"probs": torch.ones(2)}
    cached_tensors(folder(tmp_path, "decision_tasks"), {"prompts": ["a"]}, lambda: stored)
    cached_tensors(folder(tmp_path, "robustness"), {"prompts": ["b"]}, lambda: stored)

    def reads(key: str, prompt: str) -> bool:
        found = Chapter(key, load_params("ci"), tmp_path / "report").cache
        return cache.stored_tensors(found, {"prompts": [prompt]}) is not None

    assert reads("robustness", "a") and reads("validity", "a") and reads("validity", "b")
    assert not reads("decision_tasks", "b") and not reads("markedness", "a") and not reads("framing", "b")


@pytest.mark.parametrize("key", KEYS)
def test_a_chapter_reads_only_passes_of_code_its_hash_covers(key: str) -> None:
    """Every chapter it reads from is registered before it, and that chapter's hashed code is part of its own, so an
    edit that changes what those passes compute changes its folder too."""
    spec = next(spec for spec in CHAPTERS if spec.key == key)
    assert set(spec.reuses) <= set(KEYS[:KEYS.index(key)])
    for other in reused(key):
        assert set(cache_packages(other)) <= set(cache_packages(key)), other
    assert "models" in cache_packages(key) and set(spec.computing) <= set(cache_packages(key))


def test_a_cache_of_no_folder_computes_every_time() -> None:
    calls = []
    for _ in range(2):
        cached_tensors(None, {"prompts": ["a"]}, lambda: calls.append(1) or {"x": torch.ones(1)})
    assert calls == [1, 1] and cache.stored_tensors(TensorCache(Path("/nonexistent")), {"prompts": ["a"]}) is None
