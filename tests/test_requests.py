"""One frozen request per scored pass and a runtime bound once per audit (issue 43): a request is keyword-only and
cannot change after it is made, a chapter's model carries its audit's cache and token budget, and a sweep starts
from the highest block at or below its edit whose lower states the tensor cache holds, found by the models layer
itself."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from conftest import lower_positions
from llmaudit.chapters.steering_vectors import SteeringVector
from llmaudit.ledger import Ledger
from llmaudit.models.ask import ask
from llmaudit.models.request import Edit, Keep, Request, Runtime
from llmaudit.runner.chapter import open_chapter

PROMPTS = ["the nurse started a new job and she said", "the doctor started a new job and he said",
           "the engineer said that it was good", "who is the teacher"]


def vector_at(model, layer: int) -> SteeringVector:
    """A seeded random direction at block `layer`."""
    generator = torch.Generator().manual_seed(2)
    direction = torch.nn.functional.normalize(torch.randn(model.width, generator=generator), dim=0)
    return SteeringVector("v", "gender", layer, direction, torch.zeros(model.width), k=3.0)


def test_a_request_is_keyword_only_and_frozen() -> None:
    texts = ["a", "b"]
    with pytest.raises(TypeError):
        Request(texts, [1])  # type: ignore[misc]  # positional: refused
    request = Request(texts=texts, labels=[1], layers=[0])
    texts.append("c")  # the caller's list changes; the request does not
    assert request.texts == ("a", "b") and request.layers == (0,) and request.lambdas == (None,)
    with pytest.raises(dataclasses.FrozenInstanceError):
        request.texts = ("c",)  # type: ignore[misc]
    with pytest.raises(TypeError):
        Runtime(None)  # type: ignore[misc]
    with pytest.raises(ValueError, match="give the request an edit"):
        Request(texts=texts, labels=[1], targets=[0, 0, 0])


def test_a_chapter_binds_its_audits_runtime_to_the_model(tiny_model, tmp_path, monkeypatch) -> None:
    monkeypatch.setattr("llmaudit.runner.chapter.load_model", lambda name, spec: tiny_model)
    monkeypatch.setattr(tiny_model, "runtime", tiny_model.runtime)  # restored after the test
    monkeypatch.setattr(tiny_model, "ledger", Ledger(tiny_model.n_layers))
    chapter = open_chapter("decision_tasks", "ci", str(tmp_path), True)
    assert chapter.model.runtime == Runtime(cache=chapter.cache, batch_tokens=chapter.params.batch_tokens,
                                            lambda_batch=chapter.params.tasks.lambda_batch)
    assert chapter.cache is not None and chapter.cache.folder.is_relative_to(tmp_path)


@pytest.mark.parametrize(("read", "start"), [((), 1), ((1,), 0)], ids=["highest-below-edit", "below-a-read-block"])
def test_a_sweep_starts_from_the_highest_stored_block_at_or_below_its_edit(bind, tiny_model, tmp_path, monkeypatch,
                                                                         read, start) -> None:
    """States kept at blocks 0, 1 and 3 by an unsteered pass; a sweep along a vector at block 2 starts from block 1
    (block 3 lies above the edit), or from block 0 where it reads block 1's output: it runs none of the blocks up to
    its start, and its answers are those of the sweep from the tokens."""
    texts = [tiny_model.chat(p, "answer :") for p in PROMPTS]
    labels = tiny_model.single_token_ids(["she", "he", "good"])
    request = Request(texts=texts, labels=labels, layers=read, edit=Edit(vector=vector_at(tiny_model, 2),
                                                                          lambdas=[-1.0, 1.0]))
    ask(bind(tiny_model, batch_tokens=64, cache=tmp_path),
        Request(texts=texts, labels=labels, keep=Keep(blocks=(0, 1, 3))))
    monkeypatch.setattr(tiny_model, "ledger", Ledger(tiny_model.n_layers))
    started = ask(tiny_model, request)
    ran = tiny_model.ledger.actual
    from_tokens = ask(bind(tiny_model, batch_tokens=64), request)  # no cache: nothing stored to start from
    assert tiny_model.ledger.actual - 2 * ran == lower_positions(tiny_model, texts, 64) * (start + 1)
    torch.testing.assert_close(started.probs, from_tokens.probs, atol=1e-6, rtol=0)
    if read:
        torch.testing.assert_close(started.acts, from_tokens.acts, atol=1e-5, rtol=1e-5)
