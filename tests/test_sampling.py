"""The batched sampler against one `generate` call per prompt (the seed code's path, seeded with torch.manual_seed),
on a Qwen2 model with sliding-window blocks, whose window either covers every answer (the texts' beginning is
shared) or not (nothing is shared), and on a Llama model, whose full-attention caches of prefills in chunks of a small
budget join into one decoding batch; with the end-of-sequence token made likely so that answers end at different
steps."""

from __future__ import annotations

import pytest
import torch

from llmaudit.ledger import Ledger
from llmaudit.models import AuditModel, memory
from llmaudit.models.loading import architectures
from llmaudit.models.memory import Shape
from llmaudit.models.passes.batching import pad
from llmaudit.models.passes.prefix import Branch, branches, shareable
from llmaudit.models.request import Keep, Runtime, SampleCall, SampleRequest
from llmaudit.models.sampling.sample_batches import call_batches
from test_sweep_architectures import build_model

NEW = 6


def generate(model: AuditModel, call: SampleCall, request: SampleRequest | None = None) -> torch.Tensor:
    """The reference: transformers' generate on the call's texts, left-padded, num_return_sequences = per_text, with
    the request's sampling parameters (none: temperature 1, no top-k, no top-p; `NEW` tokens)."""
    request = request or SampleRequest(calls=[call], max_new_tokens=NEW)
    new, tokenizer = request.max_new_tokens, model.tokenizer
    ids, mask = pad(model.encode(call.texts), tokenizer.pad_token_id)
    torch.manual_seed(call.seed)
    with torch.inference_mode():
        out = model.hf.generate(input_ids=ids, attention_mask=mask, do_sample=True, temperature=request.temperature,
                                top_k=request.top_k or 0, top_p=request.top_p, max_new_tokens=new,
                                num_return_sequences=call.per_text, pad_token_id=tokenizer.pad_token_id)
    fresh = out[:, ids.shape[1]:]
    tokens = torch.full((len(fresh), new), -1, dtype=torch.long)
    tokens[:, : fresh.shape[1]] = fresh.masked_fill((fresh == tokenizer.eos_token_id).cumsum(-1) > 0, -1)
    return tokens


def asked(calls: list[SampleCall], **fields) -> SampleRequest:
    """The request of `calls`' answers, `NEW` tokens each, with `fields` (labels, layers, keep, sampling)."""
    return SampleRequest(calls=calls, max_new_tokens=NEW, **fields)


CHUNKED = 24  # the Llama model's token budget: its five texts prefill in three chunks, one of which splits a branch


@pytest.fixture(params=[4, 10_000, None], ids=["narrow-window", "wide-window", "full-attention-chunked"])
def model(request):
    """A fresh six-block Qwen2 model with a sliding window of `param` tokens, or (None) a Llama model prefilling in
    chunks of `CHUNKED` tokens, whose end-of-sequence logit is raised by 5 (3 in the Llama model; a hook on the
    unembedding)."""
    if request.param is None:
        built = build_model("llama")
        built.runtime = Runtime(batch_tokens=CHUNKED)
    else:
        built = build_model("qwen2")
        built.hf.config.sliding_window = request.param
    eos, boost = built.tokenizer.eos_token_id, 5.0 if request.param else 3.0

    def likelier_end(module, args, output):
        output[..., eos] += boost
        return output

    architectures.unembedding(built.hf).register_forward_hook(likelier_end)
    return built


def calls_of(model: AuditModel) -> list[SampleCall]:
    """A completion prompt answered 5 times, a choice prompt with three option orders, and one answered twice."""
    return [
        SampleCall(texts=(model.chat("write about the nurse"),), per_text=5, seed=7),
        SampleCall(texts=[model.chat(f"who is the doctor ? {order}") for order in ("a b c", "b c a", "c a b")],
                   per_text=1, seed=8),
        SampleCall(texts=(model.chat("the teacher said that she was good and he was bad"),), per_text=2, seed=9),
    ]


def test_batched_sampling_draws_what_generate_draws(model) -> None:
    calls = calls_of(model)
    texts = [text for call in calls for text in call.texts]
    encoded = model.encode(texts)
    shared = shareable(model.hf, encoded, NEW)
    assert (shared > 0) == ((getattr(model.hf.config, "sliding_window", None) or 10_000) > 100)
    if shared:  # the option orders share their question: a branch, whose cache serves the three
        assert branches([e[shared:] for e in encoded]) == [Branch((2, 3, 1), 5)]
    model.ledger = Ledger(model.n_layers)
    batched = model.sample(asked(calls)).tokens
    sampled, minimum = model.ledger.actual, model.ledger.minimum
    model.ledger = Ledger(model.n_layers)
    reference = [generate(model, call) for call in calls]
    for got, want in zip(batched, reference):
        assert torch.equal(got, want)
    lengths = [(row >= 0).sum() for tokens in reference for row in tokens]
    assert min(lengths) < NEW and max(lengths) == NEW  # some answers ended early, some ran to the end
    assert minimum <= sampled < model.ledger.actual  # never below the need, and cheaper than generate
    alone = model.sample(asked(calls[1:2])).tokens[0]  # a call's answers do not depend on the batch it ran in
    assert torch.equal(alone, batched[1])


@pytest.mark.parametrize("sampling", [{"temperature": 0.8}, {"temperature": 0.5, "top_k": 7},
                                      {"top_p": 0.6}, {"temperature": 0.8, "top_k": 20, "top_p": 0.7}],
                         ids=["temperature", "top-k", "top-p", "all"])
def test_the_requests_sampling_draws_what_generate_draws_with_it(model, sampling) -> None:
    """Paper 004 samples at temperature 0.8: the request's temperature, top-k and top-p, as generate applies them."""
    request = asked(calls_of(model), **sampling)
    for got, want in zip(model.sample(request).tokens, [generate(model, call, request) for call in request.calls]):
        assert torch.equal(got, want)
    default = model.sample(asked(calls_of(model))).tokens  # the same streams unfiltered draw otherwise
    assert not all(torch.equal(a, b) for a, b in zip(default, model.sample(request).tokens))


def test_the_prefill_gives_what_a_scoring_pass_over_the_texts_gives(model) -> None:
    calls, labels, layers = calls_of(model), [5, 6, 7], [0, model.n_layers - 1]
    texts = [text for call in calls for text in call.texts]
    samples = model.sample(asked(calls, labels=labels, layers=layers))
    scored = model.forward(texts, labels, layers)
    assert samples.probs.shape == (len(texts), len(labels)) and samples.acts.shape == (len(texts), 2, model.width)
    assert torch.allclose(samples.probs, scored.probs, atol=1e-6)
    assert torch.allclose(samples.acts, scored.acts, atol=1e-5)
    assert [torch.equal(a, b) for a, b in zip(samples.tokens, model.sample(asked(calls)).tokens)] == [True] * len(calls)
    only_layers = model.sample(asked(calls, layers=layers))  # no labels: the vocabulary's probabilities, as forward
    assert torch.allclose(only_layers.acts, scored.acts, atol=1e-5)
    assert torch.allclose(only_layers.probs, model.forward(texts, None).probs, atol=1e-5)
    assert model.sample(asked(calls)).probs is None


def test_the_prefill_keeps_the_states_a_forward_keeps(model) -> None:
    calls, block = calls_of(model), 1
    texts = [text for call in calls for text in call.texts]
    samples = model.sample(asked(calls, keep=Keep(blocks=[block])))
    kept = model.forward(texts, [5], keep=[block]).states[block]
    assert [len(s) for s in samples.states[block]] == [len(e) for e in model.encode(texts)]
    for got, want in zip(samples.states[block], kept, strict=True):
        assert torch.allclose(got, want, atol=1e-5)
    assert [torch.equal(a, b) for a, b in zip(samples.tokens, model.sample(asked(calls)).tokens)] == [True] * len(calls)


def test_call_batches_group_texts_alike_in_length_and_bound_the_decoding_memory(tiny_model, monkeypatch) -> None:
    """Every call once, longest text first (ties in order); a batch's answers (key/value cache and draws) fit the
    memory the sampler may hold on a CPU (here ten answers' worth), at most one row per budget token; a
    full-attention model's batch may hold more texts than one prefill of the budget holds (its prefill runs in chunks
    of it)."""
    calls, budget = calls_of(tiny_model) * 3, 48
    encoded = [tiny_model.encode(c.texts) for c in calls]
    shared = shareable(tiny_model.hf, [e for texts in encoded for e in texts], NEW)
    assert shared > 0  # the chat template's beginning
    longest = [max(len(e) for e in texts) for texts in encoded]
    shape = Shape.of(tiny_model.hf)
    monkeypatch.setattr(memory, "HOST_DECODE_BYTES", 10 * shape.decode_row_bytes(max(longest) + NEW))
    batches = list(call_batches(tiny_model.handle, calls, NEW, budget))
    planned = [i for batch in batches for i in batch]
    assert planned == sorted(range(len(calls)), key=lambda i: -longest[i]) and len(batches) > 1
    assert len({longest[i] for i in planned}) > 1 and planned != list(range(len(calls)))  # the order is a choice
    for batch in batches:
        rows = sum(calls[i].rows for i in batch)
        width = max(longest[i] for i in batch)
        assert len(batch) == 1 or (rows <= budget and rows * shape.decode_row_bytes(width + NEW)
                                   <= shape.decode_bytes(budget, "cpu"))
    prefills = [shared + sum(len(calls[i].texts) for i in b) * (max(longest[i] for i in b) - shared) for b in batches]
    assert max(prefills) > budget
    monkeypatch.undo()  # on a CPU the decoding may hold HOST_DECODE_BYTES: one batch
    assert len(list(call_batches(tiny_model.handle, calls, NEW, budget))) == 1


def test_a_sliding_window_models_batches_keep_their_prefill_within_the_budget() -> None:
    """Its caches cannot join: a batch's prefill runs at once, within the budget, a long beginning every text shares
    (a few-shot prompt's demonstrations) counted once: more prompts a batch than their padded length would allow."""
    model = build_model("qwen2")
    model.hf.config.sliding_window = 10_000
    few_shot = [SampleCall(texts=(model.chat("great . good . bad . fine . " * 8 + f"item {i}"),), per_text=1, seed=i)
                for i in range(9)]
    encoded = [model.encode(c.texts)[0] for c in few_shot]
    shared, longest = shareable(model.hf, encoded, 1), max(len(e) for e in encoded)
    budget = shared + 2 * (longest - shared)
    batches = list(call_batches(model.handle, few_shot, 1, budget))
    assert [len(b) for b in batches] == [2, 2, 2, 2, 1] and 2 * longest > budget


def test_sampling_needs_a_local_model(tiny_model, monkeypatch) -> None:
    monkeypatch.setattr(tiny_model, "hf", None)
    with pytest.raises(Exception, match="needs a local model"):
        tiny_model.sample(asked(calls_of(tiny_model)))


def test_sampling_out_of_memory_runs_the_batch_in_halves_with_the_same_answers(model) -> None:
    calls, labels, layers, block = calls_of(model), [5, 6, 7], [1], 1
    want = model.sample(asked(calls, labels=labels, layers=layers, keep=Keep(blocks=[block])))
    failures = [1]

    def once(module, args):
        if failures[0] and args[0].shape[0] > 1:  # the first prefill of several texts
            failures[0] -= 1
            raise torch.OutOfMemoryError("CUDA out of memory (injected)")

    hook = architectures.blocks(model.hf)[0].register_forward_pre_hook(once)
    try:
        with pytest.warns(UserWarning, match="out of memory sampling 3 prompts together: going on in two halves"):
            got = model.sample(asked(calls, labels=labels, layers=layers, keep=Keep(blocks=[block])))
    finally:
        hook.remove()
    assert [torch.equal(a, b) for a, b in zip(got.tokens, want.tokens)] == [True] * len(calls)
    assert torch.allclose(got.probs, want.probs, atol=1e-6) and torch.allclose(got.acts, want.acts, atol=1e-5)
    for a, b in zip(got.states[block], want.states[block], strict=True):
        assert torch.allclose(a, b, atol=1e-5)


def test_one_draw_is_the_draw_torch_multinomial_makes_from_the_same_stream() -> None:
    from llmaudit.models.sampling.race import draw_one

    for seed in range(20):
        probs = torch.softmax(3 * torch.randn(7, 500, generator=torch.Generator().manual_seed(seed + 100)), -1)
        probs[3] = 0.0
        probs[3, 11] = 1.0  # an ended row's dummy distribution
        probs[5] = 1 / 500  # a flat row: every entry a candidate on the CPU's path
        probs[6, :250] = 0.0  # entries that cannot win
        ours, theirs = torch.Generator().manual_seed(seed), torch.Generator().manual_seed(seed)
        for _ in range(3):  # the streams stay in step over several draws
            assert torch.equal(draw_one(probs, ours), torch.multinomial(probs, 1, generator=theirs).squeeze(1))


def test_the_cpu_race_works_out_few_exponentials_whether_the_rows_are_flat_or_peaked(monkeypatch) -> None:
    """The exponential of an entry is worked out only where its bound reaches the floor: about one entry a row
    besides the floor's own, even for a random-weight model's nearly flat rows (a weak floor made it most of them)."""
    from llmaudit.models.sampling import race

    worked: list[int] = []
    exponential = race._exponential
    monkeypatch.setattr(race, "_exponential", lambda integers: worked.append(integers.numel()) or exponential(integers))
    for scale in (0.01, 1.0, 10.0):
        probs = torch.softmax(scale * torch.randn(16, 4096, generator=torch.Generator().manual_seed(3)), -1)
        worked.clear()
        race.cpu_winners(probs, race.uniforms(probs.shape, torch.Generator().manual_seed(4)))
        assert sum(worked) <= 16 * 4


@pytest.mark.parametrize("cpu_path", [True, False], ids=["cpu", "device"])
def test_the_batch_draws_each_call_as_multinomial_over_all_its_rows_ended_ones_included(cpu_path) -> None:
    """Calls of 3, 2 and 4 rows whose live rows change from step to step: each live row's token is multinomial's over
    the call's whole table (an ended row a dummy distribution), drawn from the call's own stream, on the CPU's path
    (an ended row's integers drawn and unused) and a GPU's (run here on the CPU)."""
    from llmaudit.models.sampling.draws import Draws

    sizes = (3, 2, 4)
    calls = [SampleCall(texts=("a",) * size, per_text=1, seed=10 + i) for i, size in enumerate(sizes)]
    call_of = torch.tensor([c for c, size in enumerate(sizes) for _ in range(size)])
    draw = Draws(asked(calls), call_of, "cpu")
    draw.on_cpu = cpu_path
    theirs = [torch.Generator().manual_seed(call.seed) for call in calls]
    first = [0, 3, 5, 9]
    for step, live in enumerate([range(9), [0, 2, 3, 4, 5, 7], [1, 5, 6, 8], [2, 8]]):
        rows = torch.tensor(list(live))
        logits = 4 * torch.randn(len(rows), 300, generator=torch.Generator().manual_seed(step))
        got = draw(logits, rows)
        probs = torch.softmax(logits, -1)
        for c in range(len(sizes)):
            mine = (call_of[rows] == c).nonzero().squeeze(-1)
            if not len(mine):
                continue  # a call without live rows does not draw
            whole = torch.zeros(sizes[c], 300)
            whole[:, 0] = 1.0
            whole[rows[mine] - first[c]] = probs[mine]
            want = torch.multinomial(whole, 1, generator=theirs[c]).squeeze(1)[rows[mine] - first[c]]
            assert torch.equal(got[mine], want)


def test_a_draw_from_non_finite_probabilities_is_one_clear_error() -> None:
    from llmaudit.errors import AuditError
    from llmaudit.models.sampling.draws import Draws

    draw = Draws(asked([SampleCall(texts=("a",), per_text=1, seed=i) for i in range(3)]), torch.arange(3), "cpu")
    logits = torch.randn(3, 50)
    logits[1, 3] = float("nan")
    with pytest.raises(AuditError, match="NaN or infinity"):
        draw(logits, torch.arange(3))
    logits[1, 3], logits[2, 7] = 0.0, float("inf")  # an overflowed logit: softmax makes its row NaN
    with pytest.raises(AuditError, match="NaN or infinity"):
        draw(logits, torch.arange(3))


def test_a_reserved_layer_holds_what_a_growing_layer_holds_writing_in_place() -> None:
    from transformers.cache_utils import DynamicLayer

    from llmaudit.models.sampling.reserved import ReservedLayer

    states = [torch.randn(3, 2, 5, 4) for _ in range(2)]
    growing = DynamicLayer()
    growing.update(*states)
    reserved = ReservedLayer.joined([growing], room=2)
    start = reserved.keys.data_ptr()
    for _ in range(2):  # a decoding step: one position more
        new = [torch.randn(3, 2, 1, 4) for _ in range(2)]
        for got, want in zip(reserved.update(*new), growing.update(*new), strict=True):
            assert torch.equal(got, want)
    assert reserved.keys.data_ptr() == start and reserved.get_seq_length() == 7  # written into its room, no copy
    rows = torch.tensor([2, 0])
    reserved.batch_select_indices(rows)
    growing.batch_select_indices(rows)
    assert torch.equal(reserved.keys, growing.keys) and torch.equal(reserved.values, growing.values)
    with pytest.raises(ValueError, match="holds 7 positions"):
        reserved.update(*[torch.randn(2, 2, 1, 4) for _ in range(2)])


def test_joined_layers_hold_each_layers_rows_ending_together_after_zeros() -> None:
    from transformers.cache_utils import DynamicLayer

    from llmaudit.models.sampling.reserved import ReservedLayer

    short, long = DynamicLayer(), DynamicLayer()
    short.update(torch.randn(2, 2, 3, 4), torch.randn(2, 2, 3, 4))
    long.update(torch.randn(1, 2, 5, 4), torch.randn(1, 2, 5, 4))
    both = ReservedLayer.joined([short, long], room=1)
    assert both.get_seq_length() == 5 and both.keys.shape == (3, 2, 5, 4)
    assert torch.equal(both.keys[:2, :, 2:], short.keys) and torch.equal(both.values[2:], long.values)
    assert not both.keys[:2, :, :2].any()  # the shorter rows' padding (their masks hide it)
    both.update(torch.ones(3, 2, 1, 4), torch.ones(3, 2, 1, 4))
    assert both.get_seq_length() == 6 and bool((both.keys[:, :, 5] == 1).all())


def test_a_sampling_request_is_answered_in_its_order_from_the_cache_where_it_holds_it(tiny_model, bind, monkeypatch,
                                                                                      tmp_path) -> None:
    """`ask` over several batches gives the rows one batch gives, stores the kept states for a sweep; the
    same request again runs no forward pass (the ledger counts nothing), one that differs only in its temperature,
    top-k, top-p or a call's seed samples again."""
    from dataclasses import replace

    from llmaudit.models.ask import ask
    from llmaudit.models.passes.states import stored_states

    model = bind(tiny_model, cache=tmp_path, batch_tokens=4)  # a call's rows a batch: several batches
    calls = calls_of(model)[1:]
    assert len(list(call_batches(model.handle, calls, 3, 4))) > 1
    kept = [calls[1].texts[0], calls[0].texts[1]]
    request = SampleRequest(calls=calls, max_new_tokens=3, labels=[5, 6], layers=[1], keep=Keep(blocks=[1], texts=kept))
    whole = model.sample(request)  # one batch
    monkeypatch.setattr(model, "ledger", Ledger(model.n_layers))
    first = ask(model, request)
    assert model.ledger.actual > 0
    assert all(torch.equal(a, b) for a, b in zip(first.tokens, whole.tokens, strict=True))
    torch.testing.assert_close(first.probs[0], whole.probs, atol=1e-6, rtol=0)
    torch.testing.assert_close(first.acts[0], whole.acts, atol=1e-5, rtol=1e-5)
    states = stored_states(tmp_path, model.identity, kept, [1])
    assert states is not None and states.block == 1
    for got, text in zip(states.states, kept, strict=True):
        torch.testing.assert_close(got, whole.states[1][request.texts.index(text)], atol=1e-5, rtol=1e-5)
    monkeypatch.setattr(model, "ledger", Ledger(model.n_layers))
    again = ask(model, request)
    assert model.ledger.actual == 0 and all(torch.equal(a, b) for a, b in zip(again.tokens, first.tokens))
    assert torch.equal(again.probs, first.probs) and torch.equal(again.acts, first.acts)
    for changed in (replace(request, temperature=0.5), replace(request, top_k=5), replace(request, top_p=0.9),
                    replace(request, calls=[calls[0], replace(calls[1], seed=80)])):
        monkeypatch.setattr(model, "ledger", Ledger(model.n_layers))
        ask(model, changed)
        assert model.ledger.actual > 0, changed


def test_a_remote_model_is_refused_sampling_in_one_line(tiny_model, monkeypatch) -> None:
    from llmaudit.models.ask import ask
    from llmaudit.models.engines import NotAnswerable
    from llmaudit.models.engines.traced import TracedEngine

    monkeypatch.setattr(tiny_model, "engine", TracedEngine(tiny_model))
    with pytest.raises(NotAnswerable, match="^sampling answers needs sampled answers, which the traced engine cannot"):
        ask(tiny_model, asked(calls_of(tiny_model)))
