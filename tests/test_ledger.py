"""The compute ledger: the token-blocks each engine runs (counted by block hooks) and the minimum its prompts need
(distinct prefixes, through the blocks their use needs, once per edit above the steering block), by hand."""

from __future__ import annotations

import json

import pytest
import torch

from llmaudit import ledger as ledger_module
from llmaudit.chapters.steering_vectors import SteeringVector
from llmaudit.ledger import Ledger, ledger_path, read_calls
from llmaudit.models.passes.sweep import split_sweep


@pytest.fixture
def model(tiny_model):
    """The tiny model with a fresh ledger (the session's model is shared by many tests)."""
    tiny_model.ledger = Ledger(tiny_model.n_layers)
    return tiny_model


def distinct_prefixes(encoded: list[list[int]]) -> int:
    return len({tuple(tokens[:i]) for tokens in encoded for i in range(1, len(tokens) + 1)})


def test_shared_beginnings_are_needed_once_and_as_deep_as_their_deepest_use() -> None:
    ledger = Ledger(blocks=4)
    ledger.need([[1, 2, 3], [1, 2, 4]])
    assert ledger.minimum == 4 * 4  # prefixes 1, 12, 123, 124 through all four blocks
    ledger.need([[1, 2, 3]], depth=2)  # already needed deeper: nothing more
    ledger.need([[5, 6]], depth=2)
    assert ledger.minimum == 16 + 2 * 2
    ledger.need([[5, 6]])  # now read at the top: the two blocks above the first use
    assert ledger.minimum == 16 + 2 * 4
    ledger.need([[1, 2]], steered=(1, ["+1", "-1"]))  # blocks 0-1 known; blocks 2-3 once per edit
    assert ledger.minimum == 24 + 2 * 2 * 2
    ledger.need([[1, 2]], steered=(1, ["+1"]))
    assert ledger.minimum == 32


def test_a_traced_forward_runs_its_padded_batch_through_every_block(model) -> None:
    texts = [model.chat("the nurse said"), model.chat("the nurse said she was tired of it")]
    encoded = model.encode(texts)
    model.forward(texts, [5, 6], batch_tokens=4096, traced=True)
    assert model.ledger.actual == 2 * max(map(len, encoded)) * model.n_layers  # one left-padded batch
    assert model.ledger.minimum == distinct_prefixes(encoded) * model.n_layers


def test_activations_alone_need_only_the_blocks_up_to_the_deepest_read(model) -> None:
    texts = [model.chat("the doctor said")]
    model.forward(texts, [], layers=[1], traced=True)
    tokens = len(model.encode(texts)[0])
    assert model.ledger.minimum == tokens * 2 and model.ledger.actual == tokens * model.n_layers


def test_a_sweep_with_its_derivative_is_at_the_minimum_for_one_prompt(model, tmp_path) -> None:
    model.ledger.path = tmp_path / "ledger" / "chapter.json"
    generator = torch.Generator().manual_seed(0)
    direction = torch.nn.functional.normalize(torch.randn(model.width, generator=generator), dim=0)
    vector = SteeringVector("v", "gender", 1, direction, torch.zeros(model.width), k=2.0)
    texts = [model.chat("the engineer said")]
    split_sweep(model.handle, texts, [5, 6], vector, [-1.0, 0.0, 1.0], targets=[0])
    tokens, upper = len(model.encode(texts)[0]), model.n_layers - 2
    assert model.ledger.actual == tokens * (2 + upper * 3 + upper)  # lower once, upper per lambda and derivative
    assert model.ledger.minimum == model.ledger.actual
    needed = model.ledger.minimum  # the same vector loaded again (equal tensors, new objects) needs nothing more
    again = SteeringVector("v", "gender", 1, direction.clone(), torch.zeros(model.width), k=2.0)
    split_sweep(model.handle, texts, [5, 6], again, [-1.0, 0.0, 1.0], targets=[0])
    assert model.ledger.minimum == needed and model.ledger.actual == 2 * needed
    saved = json.loads(model.ledger.path.read_text())
    seconds = saved["calls"]["sweep"].pop("seconds")
    assert saved == {"blocks": model.n_layers, "actual": model.ledger.actual, "minimum": model.ledger.minimum,
                     "calls": {"sweep": {"actual": model.ledger.actual, "minimum": model.ledger.minimum}}}
    assert seconds > 0


def test_each_call_is_counted_under_its_label_and_the_labels_add_up(model, tmp_path) -> None:
    model.ledger.path = ledger_path(tmp_path, "chapter")
    texts = [model.chat("the nurse said"), model.chat("the nurse said she was tired")]
    model.forward(texts, [5, 6], desc="first")
    model.forward(texts, [5, 6], traced=True, desc="again")  # needs nothing the first call did not
    calls = read_calls(tmp_path)["chapter"]
    assert set(calls) == {"prefix: first", "traced: again"}
    assert calls["traced: again"]["minimum"] == 0 and calls["traced: again"]["actual"] > 0
    assert sum(c["actual"] for c in calls.values()) == model.ledger.actual
    assert sum(c["minimum"] for c in calls.values()) == model.ledger.minimum


def test_a_sweep_with_the_unsteered_model_is_at_the_minimum_for_one_prompt(model) -> None:
    generator = torch.Generator().manual_seed(0)
    direction = torch.nn.functional.normalize(torch.randn(model.width, generator=generator), dim=0)
    vector = SteeringVector("v", "gender", 1, direction, torch.zeros(model.width), k=2.0)
    texts = [model.chat("the engineer said")]
    split_sweep(model.handle, texts, [5, 6], vector, [None, 1.0], None)
    tokens, upper = len(model.encode(texts)[0]), model.n_layers - 2
    assert model.ledger.actual == tokens * (2 + upper * 2)  # lower once, upper unsteered and at lambda 1
    assert model.ledger.minimum == tokens * (model.n_layers + upper)  # every block unsteered, the upper once edited
    assert model.ledger.minimum == model.ledger.actual


def test_the_forward_of_a_local_model_runs_the_shared_beginning_once(model) -> None:
    texts = [model.chat(f"a long shared instruction about jobs and people , then {word}") for word in
             ("nurse", "doctor", "teacher")]
    encoded = model.encode(texts)
    model.forward(texts, [5, 6])  # unsteered and local: the shared-prefix engine
    assert model.ledger.minimum == distinct_prefixes(encoded) * model.n_layers
    assert model.ledger.actual == model.ledger.minimum  # equal-length continuations: no padding
    traced = Ledger(model.n_layers)
    model.ledger = traced
    model.forward(texts, [5, 6], traced=True)
    assert traced.actual > traced.minimum  # the traced forward runs the beginning once per prompt


def test_each_call_label_gets_its_own_wall_time_and_none_between_calls(monkeypatch, tmp_path) -> None:
    now = [0.0]
    monkeypatch.setattr(ledger_module.time, "perf_counter", lambda: now[0])
    ledger = Ledger(4, path=ledger_path(tmp_path, "chapter"))
    now[0] = 5.0  # before any call: charged to none
    with ledger.labelled("outer"):
        ledger.ran(2)
        now[0] = 7.0
        with ledger.labelled("inner"):  # a call inside another counts as its own
            ledger.ran(3)
            now[0] = 10.0
        now[0] = 11.0
    now[0] = 20.0  # between calls
    with ledger.labelled("outer"):
        now[0] = 21.0
    assert ledger.seconds == {"outer": 4.0, "inner": 3.0}
    saved = read_calls(tmp_path)["chapter"]
    assert saved == {"outer": {"actual": 2, "minimum": 0, "seconds": 4.0},
                     "inner": {"actual": 3, "minimum": 0, "seconds": 3.0}}
