"""The engines as objects (`models.engines`): one place chooses them, each answers what it declares and refuses the
rest with one line naming itself and what it lacks, and the traced engine's sweep is the fast engine's."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import torch

from llmaudit.models.ask import ask
from llmaudit.models.engines import Capability, NotAnswerable
from llmaudit.models.engines.traced import TracedEngine
from llmaudit.models.request import Edit, Request, SampleCall, SampleRequest
from llmaudit.models.vector import SteeringVector

LIB = Path(__file__).resolve().parents[1] / "lib" / "llmaudit"
ENGINES = {"FastEngine", "PlainEngine", "TracedEngine", "FAST"}


def _vector(model) -> SteeringVector:
    direction = torch.nn.functional.normalize(torch.arange(1.0, model.width + 1), dim=0)
    return SteeringVector("v", "gender", 1, direction, torch.zeros(model.width), k=1.5)


@pytest.fixture
def traced(tiny_model, monkeypatch):
    """The tiny model answered by the traced engine, as a remote model is."""
    monkeypatch.setattr(tiny_model, "engine", TracedEngine(tiny_model))
    return tiny_model


def test_one_module_chooses_the_engine() -> None:
    """Only `models.engines.choice` names the engines' classes or the fast table outside their own modules."""
    naming = set()
    for path in LIB.rglob("*.py"):
        if path.parent.name == "engines" or path.name == "architectures.py":
            continue
        names = {node.id for node in ast.walk(ast.parse(path.read_text())) if isinstance(node, ast.Name)}
        names |= {node.attr for node in ast.walk(ast.parse(path.read_text())) if isinstance(node, ast.Attribute)}
        if names & ENGINES:
            naming.add(path.relative_to(LIB).as_posix())
    assert naming == set()


def test_the_local_tiny_model_runs_the_fast_engine(tiny_model) -> None:
    assert tiny_model.engine.name == "fast" and set(Capability) == tiny_model.engine.capabilities


def _request(model, **fields) -> Request:
    texts = [model.chat(t) for t in ("she is a nurse", "he is a doctor", "they teach")]
    return Request(texts=texts, labels=model.single_token_ids(["yes", "no"]), **fields)


def test_the_traced_engine_sweeps_what_the_fast_engine_sweeps(tiny_model, bind, monkeypatch) -> None:
    """Probabilities and block outputs per lambda, by nnsight's trace one lambda at a time."""
    request = _request(tiny_model, layers=[0, 2], edit=Edit(vector=_vector(tiny_model), lambdas=[None, -1.0, 0.5]))
    fast = ask(bind(tiny_model, batch_tokens=60), request)
    monkeypatch.setattr(tiny_model, "engine", TracedEngine(tiny_model))
    traced = ask(tiny_model, request)
    torch.testing.assert_close(traced.probs, fast.probs, atol=1e-5, rtol=0)
    torch.testing.assert_close(traced.acts, fast.acts, atol=1e-5, rtol=1e-5)


def test_an_engine_refuses_what_it_cannot_answer_in_one_line(traced) -> None:
    """The exact derivative and sampling, asked of the traced engine: one line naming the engine and the lack."""
    request = _request(traced, edit=Edit(vector=_vector(traced), lambdas=[0.0]), targets=[0, 1, 0], desc="sweep")
    with pytest.raises(NotAnswerable) as derivative:
        ask(traced, request)
    with pytest.raises(NotAnswerable) as sampling:
        traced.sample(SampleRequest(calls=[SampleCall(texts=(traced.chat("she"),), per_text=2, seed=1)],
                                    max_new_tokens=3))
    for refused, lack in ((derivative, "exact derivatives"), (sampling, "sampled answers")):
        line = str(refused.value)
        assert "\n" not in line and "traced engine" in line and lack in line
    assert "'sweep'" in str(derivative.value)
