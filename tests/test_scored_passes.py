"""Every call of a chapter into the model layer, scored pass or sampling, goes through the one entry point
`models.ask.ask` and gives one `Outputs` (no chapter calls the model's forward, sampler or handle itself, so none
bypasses its cache keys and engines), no code is left unreachable (mypy's `warn_unreachable`), and a forward's
`probs` holds probabilities whether or not labels were asked for."""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

import torch

from llmaudit.models.ask import Outputs, ask
from llmaudit.models.request import Request, SampleCall, SampleRequest

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = ROOT / "lib" / "llmaudit" / "chapters"


def bypasses(path: Path) -> list[int]:
    """Lines of `path` that call some object's `.forward(...)`, read a `.handle` or import below the entry point
    (`models.sampled`, the engines' sampler)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    below = {"llmaudit.models.sampled", "llmaudit.models.sampling.batched"}
    return [node.lineno for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "forward"
            or isinstance(node, ast.Attribute) and node.attr == "handle"
            or isinstance(node, ast.ImportFrom) and node.module in below]


def test_no_chapter_calls_the_model_around_the_entry_point() -> None:
    found = {str(path.relative_to(ROOT)): lines for path in sorted(CHAPTERS.rglob("*.py")) if (lines := bypasses(path))}
    assert found == {}, f"chapters must call the model through models.ask.ask: {found}"


def test_one_entry_point_answers_a_scored_pass_and_a_sampling_with_one_output_type(tiny_model) -> None:
    """A sampling's prefill reads what a scored pass of the same texts reads, in the same shapes (a lambda axis of
    one); only the sampling has answers, and one asking for no labels gets no label columns."""
    texts = [tiny_model.chat("who is the doctor"), tiny_model.chat("write one sentence about a nurse")]
    scored = ask(tiny_model, Request(texts=texts, labels=[5, 6], layers=[1]))
    calls = [SampleCall(texts=texts, per_text=2, seed=3)]
    sampled = ask(tiny_model, SampleRequest(calls=calls, max_new_tokens=3, labels=[5, 6], layers=[1]))
    assert type(scored) is type(sampled) is Outputs
    assert scored.probs.shape == sampled.probs.shape == (1, 2, 2) and scored.tokens == ()
    torch.testing.assert_close(sampled.probs, scored.probs, atol=1e-5, rtol=0)
    assert scored.acts is not None and sampled.acts is not None and sampled.acts.shape == scored.acts.shape
    torch.testing.assert_close(sampled.acts, scored.acts, atol=1e-4, rtol=1e-4)
    assert [t.shape for t in sampled.tokens] == [(4, 3)] and sampled.derivative is None
    bare = ask(tiny_model, SampleRequest(calls=calls, max_new_tokens=3))
    assert bare.probs.shape == (1, 2, 0) and bare.acts is None
    assert all(torch.equal(a, b) for a, b in zip(bare.tokens, sampled.tokens, strict=True))


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
