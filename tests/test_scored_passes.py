"""Every scored forward pass of a chapter goes through the one entry point `models.steer.run_pass` (no chapter calls
the model's forward itself, so none bypasses its cache keys and engines), no code is left unreachable (mypy's
`warn_unreachable`), and a forward's `probs` holds probabilities whether or not labels were asked for."""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = ROOT / "lib" / "llmaudit" / "chapters"


def forward_calls(path: Path) -> list[int]:
    """Lines of `path` that call some object's `.forward(...)`."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [node.lineno for node in ast.walk(tree) if isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute) and node.func.attr == "forward"]


def test_no_chapter_calls_the_model_forward_itself() -> None:
    found = {str(path.relative_to(ROOT)): lines for path in sorted(CHAPTERS.rglob("*.py"))
             if (lines := forward_calls(path))}
    assert found == {}, f"chapters must score through models.steer.run_pass: {found}"


def test_mypy_reports_unreachable_code() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["mypy"]
    assert config.get("warn_unreachable") is True


def test_a_forward_without_labels_gives_the_vocabulary_probabilities(tiny_model) -> None:
    texts = [tiny_model.chat("write one sentence about a nurse", "the"), tiny_model.chat("who is the doctor", "he")]
    whole = tiny_model.forward(texts, None).probs
    vocabulary = list(range(whole.shape[-1]))
    assert (whole >= 0).all() and torch.allclose(whole.sum(-1), torch.ones(len(texts)), atol=1e-5)
    assert torch.allclose(whole, tiny_model.forward(texts, vocabulary).probs, atol=1e-6)
    traced = tiny_model.forward(texts, None, traced=True).probs  # the traced engine reads out the same way
    assert torch.allclose(traced, whole, atol=1e-5)
