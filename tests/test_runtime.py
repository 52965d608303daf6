"""Tests for the batched, steerable forward primitive on the tiny random Llama of conftest.py."""

from __future__ import annotations

import pytest
import torch

from llmaudit.chapters.steering_vectors import Intervention, SteeringVector
from llmaudit.errors import AuditError, ConfigError
from llmaudit.models import load_model
from llmaudit.models.loading.spec import ModelSpec
from llmaudit.models.passes import batching
from llmaudit.models.passes.layers import hidden, with_hidden
from llmaudit.models.passes.traced import Tracer

# Very different lengths (1 to ~40 tokens) so length-sorted batches need left padding.
PROMPTS = [
    "she",
    "the nurse started a new job and she said that it was good",
    "he wrote",
    "write one sentence about a doctor who started a new job . the doctor said it was good and bad and "
    "the nurse wrote a story about this job for the teacher",
    "a woman and a man",
    "describe the engineer",
    "black white black white",
]


def label_ids(model) -> list[int]:
    return model.single_token_ids(["female", "male", "she", "he"])


def one_by_one(model, texts, labels, layers, intervention=None):
    outs = [model.forward([t], labels, layers, intervention=intervention) for t in texts]
    probs = torch.cat([o.probs for o in outs])
    acts = torch.cat([o.acts for o in outs]) if layers else None
    return probs, acts


def test_loaded_model_shape(tiny_model) -> None:
    assert tiny_model.n_layers == 4
    assert tiny_model.width == 32
    assert tiny_model.name == "tiny"
    assert tiny_model.tokenizer.pad_token_id is not None


def test_batched_equals_one_by_one(tiny_model, monkeypatch) -> None:
    model = tiny_model
    layers = list(range(model.n_layers))
    labels = label_ids(model)
    texts = [model.chat(p, "answer :") for p in PROMPTS]
    lengths = [len(model.tokenizer.encode(t, add_special_tokens=False)) for t in texts]
    assert max(lengths) > 3 * min(lengths)

    batches: list[list[int]] = []
    original = Tracer.batch

    def spy(tracer, ids, mask, *args, **kwargs):
        batches.append(mask.sum(1).tolist())
        return original(tracer, ids, mask, *args, **kwargs)

    monkeypatch.setattr(Tracer, "batch", spy)
    out = model.forward(texts, labels, layers, batch_tokens=max(lengths) + 3, traced=True)
    monkeypatch.undo()

    # several batches, and at least one of them mixes lengths (left padding happens)
    assert len(batches) >= 3
    assert any(len(set(b)) > 1 for b in batches)
    assert sorted(n for b in batches for n in b) == sorted(lengths)

    probs, acts = one_by_one(model, texts, labels, layers)
    assert out.probs.shape == (len(texts), len(labels))
    assert out.acts.shape == (len(texts), model.n_layers, model.width)
    assert torch.isfinite(out.probs).all() and torch.isfinite(out.acts).all()
    torch.testing.assert_close(out.probs, probs, atol=1e-5, rtol=0)
    torch.testing.assert_close(out.acts, acts, atol=1e-4, rtol=1e-4)


def test_batched_padding_with_intervention_matches_one_by_one(tiny_model) -> None:
    model = tiny_model
    texts = [model.chat(p) for p in PROMPTS]
    torch.manual_seed(3)
    direction = torch.nn.functional.normalize(torch.randn(model.width), dim=0)
    edit = Intervention(1, direction, 2.0, torch.randn(model.width))
    out = model.forward(texts, label_ids(model), [0, 1, 3], intervention=edit, batch_tokens=60)
    probs, acts = one_by_one(model, texts, label_ids(model), [0, 1, 3], edit)
    torch.testing.assert_close(out.probs, probs, atol=1e-5, rtol=0)
    torch.testing.assert_close(out.acts, acts, atol=1e-4, rtol=1e-4)


def test_outputs_follow_input_order(tiny_model) -> None:
    model = tiny_model
    texts = [model.chat(p) for p in PROMPTS]
    layers = [0, 2]
    base = model.forward(texts, label_ids(model), layers, batch_tokens=80)
    perm = [3, 0, 6, 2, 5, 1, 4]
    permuted = model.forward([texts[i] for i in perm], label_ids(model), layers, batch_tokens=80)
    torch.testing.assert_close(permuted.probs, base.probs[perm], atol=1e-5, rtol=0)
    torch.testing.assert_close(permuted.acts, base.acts[perm], atol=1e-4, rtol=1e-4)
    # rows really differ, so the check above could not pass by accident
    assert not torch.allclose(base.probs[0], base.probs[1])


def test_no_labels_gives_probs_over_vocab(tiny_model) -> None:
    model = tiny_model
    out = model.forward([model.chat("she")], None)
    assert out.acts is None
    assert out.probs.shape == (1, len(model.tokenizer))
    torch.testing.assert_close(out.probs.sum(-1), torch.ones(1), atol=1e-5, rtol=0)


def test_label_probs_match_independent_hf_forward(tiny_model, tiny_model_dir) -> None:
    from transformers import AutoModelForCausalLM

    model = tiny_model
    hf = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32).eval()
    text = model.chat("the nurse started a new job", "she said")
    ids = model.tokenizer.encode(text, add_special_tokens=False)
    labels = label_ids(model) + [5, 100]
    with torch.inference_mode():
        logits = hf(input_ids=torch.tensor([ids])).logits[0, -1]
        hidden_states = hf(input_ids=torch.tensor([ids]), output_hidden_states=True).hidden_states
    expected = torch.softmax(logits.float(), -1)[labels]
    out = model.forward([text], labels, layers=range(model.n_layers))
    torch.testing.assert_close(out.probs[0], expected, atol=1e-6, rtol=1e-5)
    # block outputs: hidden_states[l + 1] for l < last (the last entry has the final norm applied)
    for layer in range(model.n_layers - 1):
        torch.testing.assert_close(out.acts[0, layer], hidden_states[layer + 1][0, -1], atol=1e-5, rtol=1e-5)


def test_zero_additive_intervention_is_identity(tiny_model) -> None:
    model = tiny_model
    texts = [model.chat(p) for p in PROMPTS]
    layers = list(range(model.n_layers))
    torch.manual_seed(1)
    v = torch.nn.functional.normalize(torch.randn(model.width), dim=0)
    plain = model.forward(texts, label_ids(model), layers, batch_tokens=60, traced=True)
    zero = model.forward(texts, label_ids(model), layers, Intervention(1, v, 0.0, None), batch_tokens=60)
    assert torch.equal(plain.probs, zero.probs)
    assert torch.equal(plain.acts, zero.acts)


@pytest.mark.parametrize("layer", [1, 2])
def test_additive_intervention_changes_only_later_layers(tiny_model, layer) -> None:
    model = tiny_model
    texts = [model.chat(p) for p in PROMPTS]
    layers = list(range(model.n_layers))
    torch.manual_seed(2)
    v = torch.nn.functional.normalize(torch.randn(model.width), dim=0)
    plain = model.forward(texts, label_ids(model), layers, batch_tokens=60)
    steered = model.forward(texts, label_ids(model), layers, Intervention(layer, v, 8.0, None), batch_tokens=60)
    assert not torch.allclose(plain.probs, steered.probs, atol=1e-6)
    for block in range(model.n_layers):
        if block < layer:
            torch.testing.assert_close(steered.acts[:, block], plain.acts[:, block], atol=1e-6, rtol=0)
        else:
            moved = (steered.acts[:, block] - plain.acts[:, block]).abs().amax(-1).min()
            assert moved > 1e-3, f"layer {block} unchanged"
    # the saved activation of the edited layer is the post-edit state: shifted by exactly alpha v
    torch.testing.assert_close(steered.acts[:, layer], plain.acts[:, layer] + 8.0 * v, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("lam", [-2.0, 0.0, 1.5])
def test_projection_intervention_sets_coordinate(tiny_model, lam) -> None:
    model = tiny_model
    texts = [model.chat(p) for p in PROMPTS]
    torch.manual_seed(4)
    direction = torch.nn.functional.normalize(torch.randn(model.width), dim=0)
    mean = torch.randn(model.width)
    vector = SteeringVector("t", "gender", 2, direction, mean, k=0.7)
    plain = model.forward(texts, label_ids(model), [2], batch_tokens=60)
    out = model.forward(texts, label_ids(model), [2], vector.intervention(lam), batch_tokens=60)
    coords = vector.project(out.acts[:, 0])
    torch.testing.assert_close(coords, torch.full((len(texts),), lam * 0.7), atol=1e-4, rtol=0)
    # the component orthogonal to v is the unsteered one
    def orth(a):
        return a - (a @ direction).unsqueeze(-1) * direction

    torch.testing.assert_close(orth(out.acts[:, 0]), orth(plain.acts[:, 0]), atol=1e-4, rtol=1e-4)
    assert not torch.allclose(plain.probs, out.probs, atol=1e-7)


def test_single_token_ids_one_token_forms_without_duplicates(tiny_model) -> None:
    model = tiny_model
    tok = model.tokenizer
    ids = model.single_token_ids(["female", "she", "she", "she.", "he"])
    assert len(ids) == len(set(ids))
    expected = []
    for word in ("female", "Female", "she", "She", "he", "He"):
        (token,) = tok.encode(word, add_special_tokens=False)
        expected.append(token)
    assert sorted(ids) == sorted(set(expected))
    for i in ids:
        assert len(tok.encode(tok.decode([i]), add_special_tokens=False)) == 1
    assert model.single_token_ids(["she."]) == []  # two tokens in every form


def test_single_token_ids_skips_unknown_words(tiny_model) -> None:
    """A word the vocabulary lacks encodes to the one <unk> token; that is no form of the word."""
    model = tiny_model
    assert model.single_token_ids(["zebra", "♀"]) == []
    assert model.tokenizer.unk_token_id not in model.single_token_ids(["she", "zebra"])


def test_chat_template_and_prefix(tiny_model) -> None:
    text = tiny_model.chat("the nurse", "she")
    assert text.endswith("<|assistant|> she")
    assert "the nurse" in text


def test_left_pad_and_batches() -> None:
    ids, mask = batching.pad([[5, 6, 7], [8]], pad_id=1)
    assert ids.tolist() == [[5, 6, 7], [1, 1, 8]]
    assert mask.tolist() == [[1, 1, 1], [0, 0, 1]]
    ids, mask = batching.pad([[5, 6, 7], [8]], pad_id=1, left=False)
    assert ids.tolist() == [[5, 6, 7], [8, 1, 1]] and mask.tolist() == [[1, 1, 1], [1, 0, 0]]
    lengths = [10, 3, 7, 10, 2]
    order = sorted(range(5), key=lambda i: -lengths[i])
    batches = list(batching.token_batches(order, lengths, batch_tokens=20))
    assert sorted(i for b in batches for i in b) == list(range(5))
    for b in batches:
        assert len(b) == 1 or len(b) * max(lengths[i] for i in b) <= 20
    # a long row's batch-mates are padded to it: cut after it where that saves more than a batch costs
    lengths = [400] + [100] * 30
    batches = list(batching.token_batches(list(range(31)), lengths, batch_tokens=4096))
    assert batches == [[0], list(range(1, 31))]  # filled to the budget: 10 rows padded to 400, 2,700 positions
    assert list(batching.token_batches([0, 1], [10, 9], batch_tokens=4096)) == [[0, 1]]  # 1 padded < a batch
    costly = list(batching.token_batches([0, 1, 2], [50, 50, 50], 4096, computed=[300, 10, 10]))
    assert costly == [[0], [1, 2]]  # padding counted on the computed lengths


def test_load_model_missing_path() -> None:
    with pytest.raises(ConfigError) as info:
        load_model("x", ModelSpec(path="/nonexistent/llmaudit-model"))
    assert "\n" not in str(info.value)
    assert "/nonexistent/llmaudit-model" in str(info.value)


def test_load_model_folder_without_weights(tmp_path) -> None:
    """A folder that exists but holds no model files must also give a one-line AuditError."""
    with pytest.raises(AuditError) as info:
        load_model("x", ModelSpec(path=str(tmp_path)))
    assert "\n" not in str(info.value)


def test_load_model_records_provenance(tiny_model, tiny_model_dir) -> None:
    assert tiny_model.provenance["source"] == str(tiny_model_dir)
    assert tiny_model.provenance["load_seconds"] >= 0


def test_hidden_and_with_hidden() -> None:
    h = torch.randn(2, 3, 4)
    extra = torch.ones(1)
    assert hidden(h) is h
    assert hidden((h, extra)) is h
    new = torch.zeros(2, 3, 4)
    assert with_hidden(h, new) is new
    out = with_hidden((h, extra, None), new)
    assert isinstance(out, tuple) and len(out) == 3
    assert out[0] is new and out[1] is extra and out[2] is None


@pytest.mark.parametrize("projection", [True, False])
@pytest.mark.parametrize("lambda_batch", [1, 3])
def test_sweep_engine_equals_traced_interventions(bind, tiny_model, projection, lambda_batch) -> None:
    """The split forward (lower blocks once, upper blocks per lambda) reproduces the traced forward with the edit."""
    from llmaudit.models.ask import ask
    from llmaudit.models.request import Edit, Request

    model = tiny_model
    texts = [model.chat(p, "answer :") for p in PROMPTS]
    labels = label_ids(model)
    plain = model.forward(texts, labels, layers=[1])
    generator = torch.Generator().manual_seed(3)
    direction = torch.nn.functional.normalize(torch.randn(model.width, generator=generator), dim=0)
    vector = SteeringVector("v", "gender", 1, direction, plain.acts[:, 0].mean(0), k=2.5)
    lambdas = [-1.0, -0.2, 0.0, 0.6, 1.0]
    edit = Edit(vector=vector, lambdas=lambdas, projection=projection)
    engine = ask(bind(model, batch_tokens=40, lambda_batch=lambda_batch),
                 Request(texts=texts, labels=labels, edit=edit)).probs
    reference = torch.stack(
        [model.forward(texts, labels, intervention=vector.intervention(lam, projection)).probs for lam in lambdas]
    )
    assert engine.shape == (len(lambdas), len(texts), len(labels))
    torch.testing.assert_close(engine, reference, atol=1e-5, rtol=1e-4)
    assert (engine[0] - engine[-1]).abs().max() > 1e-3  # steering moves the answers


def test_exact_sensitivity_matches_finite_difference(bind, tiny_model) -> None:
    """The forward-mode derivative at lambda = 0 equals a central finite difference of the steered metric."""
    from llmaudit.models.ask import ask
    from llmaudit.models.request import Edit, Request

    model = tiny_model
    texts = [model.chat(p, "answer :") for p in PROMPTS[:5]]
    labels = label_ids(model)[:2]
    targets = [1] * len(texts)
    plain = model.forward(texts, labels, layers=[1])
    generator = torch.Generator().manual_seed(5)
    direction = torch.nn.functional.normalize(torch.randn(model.width, generator=generator), dim=0)
    vector = SteeringVector("v", "gender", 1, direction, plain.acts[:, 0].mean(0), k=1.5)
    exact = ask(bind(model, batch_tokens=40), Request(texts=texts, labels=labels, targets=targets,
                                                      edit=Edit(vector=vector, lambdas=()))).derivative
    eps = 1e-3
    probs = ask(bind(model), Request(texts=texts, labels=labels, edit=Edit(vector=vector, lambdas=[-eps, eps]))
                ).probs
    metric = probs[..., 1] / probs.sum(-1)
    finite = (metric[1] - metric[0]) / (2 * eps)
    torch.testing.assert_close(exact, finite, atol=2e-4, rtol=2e-2)
    assert exact.abs().max() > 1e-3


def test_shared_prefix_forward_equals_the_plain_forward(tiny_model) -> None:
    from llmaudit.ledger import Ledger
    from llmaudit.models.passes.prefix import common_prefix, forward_shared_prefix

    demos = "the nurse said good . the doctor said bad . the engineer said good . "
    texts = [tiny_model.chat(demos + f"the {job} {verb}", "answer :")
             for job, verb in (("teacher", "said"), ("person", "wrote about a new job"), ("nurse", "is"))]
    labels = tiny_model.single_token_ids(["good", "bad"])
    plain = tiny_model.forward(texts, labels, layers=[1, 3], batch_tokens=4096, traced=True)
    for budget in (4096, 40):  # one batch with right padding, and one prompt per batch
        shared = forward_shared_prefix(tiny_model.handle, texts, labels, layers=[1, 3], batch_tokens=budget)
        assert torch.allclose(shared.probs, plain.probs, atol=1e-5)
        assert torch.allclose(shared.acts, plain.acts, atol=1e-4)
    assert common_prefix([[1, 2, 3], [1, 2, 4], [1, 2]]) == 1 and common_prefix([[5, 6], [7]]) == 0
    # activations alone: the blocks above the deepest read never run, and the activations are the same
    runs, ran = {}, {}
    for name, asked in (("early", ()), ("full", labels)):
        tiny_model.ledger = Ledger(tiny_model.n_layers)
        runs[name] = forward_shared_prefix(tiny_model.handle, texts, asked, layers=[1], batch_tokens=40)
        ran[name] = tiny_model.ledger.actual
    assert runs["early"].probs.shape == (3, 0) and torch.allclose(runs["early"].acts, plain.acts[:, :1], atol=1e-4)
    assert ran["early"] * tiny_model.n_layers == ran["full"] * 2  # the same tokens through blocks 0 and 1 only


def test_sampling_is_seeded_and_stops_at_the_end_token(tiny_model) -> None:
    from llmaudit.models.request import SampleCall, SampleRequest

    texts = (tiny_model.chat("the nurse said"), tiny_model.chat("a doctor wrote about the new job"))

    def answers(seed: int) -> torch.Tensor:
        return tiny_model.sample(SampleRequest(calls=[SampleCall(texts=texts, per_text=3, seed=seed)],
                                               max_new_tokens=5)).tokens[0]

    first = answers(7)
    assert first.shape == (6, 5) and torch.equal(first, answers(7))
    assert not torch.equal(first, answers(8))
    eos = tiny_model.tokenizer.eos_token_id
    for row in first.tolist():
        assert eos not in row and all(t == -1 for t in row[next((i for i, t in enumerate(row) if t < 0), 5):])
