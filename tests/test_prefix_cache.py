"""The sampler's prefix cache (`models.sampling.prefix_cache`) on the tiny stand-in: markedness's nine-shot prompts
sampled in several batches, their demonstrations run once for all of them, draw the same tokens and label
probabilities as each batch sampled on its own (the sampler before the cache: every batch ran its beginning), and the
ledger counts the demonstrations' token-blocks once."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from llmaudit.chapters.decision_tasks.base import answer_ids
from llmaudit.chapters.markedness.metrics import LABELS
from llmaudit.chapters.markedness.prompts import classification_prompt, label_word
from llmaudit.ledger import Ledger
from llmaudit.models import load_model
from llmaudit.models.ask import ask
from llmaudit.models.loading.spec import ModelSpec
from llmaudit.models.loading.standin import build
from llmaudit.models.passes.prefix import Past, common_prefix
from llmaudit.models.request import Runtime, SampleCall, SampleRequest
from llmaudit.models.sampling.batched import sample_calls
from llmaudit.models.sampling.prefix_cache import PrefixCache
from llmaudit.models.sampling.sample_batches import call_batches

DEMOS = [("The food was cold and late.", "negative"), ("It arrived on Tuesday.", "neutral"),
         ("Lovely staff, great view!", "positive"), ("Never again.", "negative"), ("The box is blue.", "neutral"),
         ("Best purchase this year.", "positive"), ("Broke after a week.", "negative"),
         ("It weighs two pounds.", "neutral"), ("My kids adore it.", "positive")]
PROBES = ["Her", "His", "Their", "My", "Our", "Your", "This", "That", "Every", "Some", "Most", "Few"]
BATCH = 4  # texts per batch: the twelve prompts sample in three batches


@pytest.fixture(scope="module")
def standin(tmp_path_factory):
    """The tiny stand-in (a random four-block Llama with the default model's tokenizer), sampling four prompts a
    batch."""
    folder = build("tiny", tmp_path_factory.mktemp("standin") / "tiny")
    model = load_model("tiny-standin", ModelSpec(path=str(folder), device="cpu", dtype="float32"))
    model.runtime = Runtime(batch_tokens=BATCH)
    return model


def nine_shot(model, seed: int = 2024) -> SampleRequest:
    """Markedness's nine-shot request (`chapters.markedness.sampled.sample_texts`): one answer per prompt, each from
    its own stream, three tokens at temperature 0.8, with the label words' probabilities."""
    texts = [model.chat(*classification_prompt(f"{who} order was fine, {n} stars.", DEMOS))
             for n, who in enumerate(PROBES)]
    words = [label_word(label, True, "paper") for label in LABELS]
    calls = [SampleCall(texts=(text,), per_text=1, seed=seed * 1_000_003 + i) for i, text in enumerate(texts)]
    return SampleRequest(calls=calls, max_new_tokens=3, temperature=0.8, labels=answer_ids(model.tokenizer, words))


def test_demonstrations_run_once_across_batches_drawing_the_same_tokens(standin) -> None:
    request = nine_shot(standin)
    standin.ledger, alone = Ledger(standin.n_layers), []  # each batch on its own: its beginning run again
    handle = standin.handle
    batches = list(call_batches(handle, request.calls, request.max_new_tokens, BATCH))
    assert len(batches) == 3
    for batch in batches:
        alone.append(sample_calls(handle, replace(request, calls=[request.calls[i] for i in batch]),
                                  batch_tokens=BATCH))
    before = standin.ledger.totals()
    standin.ledger = Ledger(standin.n_layers)
    shared = ask(standin, request)
    after = standin.ledger.totals()
    order = [i for batch in batches for i in batch]
    for k, i in enumerate(order):
        assert torch.equal(shared.tokens[i], [t for part in alone for t in part.tokens][k])
    probs = torch.cat([part.probs for part in alone])
    assert torch.allclose(shared.probs[0, order], probs, atol=1e-5, rtol=0)
    demonstrations = common_prefix(handle.encode(request.texts))
    assert demonstrations > 200  # the template, instruction and nine demonstrations
    assert after["minimum"] == before["minimum"]
    assert before["actual"] - after["actual"] == (len(batches) - 1) * demonstrations * standin.n_layers


def test_a_beginning_continues_the_kept_one_where_they_agree_and_equals_a_fresh_run(standin) -> None:
    standin.ledger, prefixes = Ledger(standin.n_layers), PrefixCache()
    handle = standin.handle
    first, second = (handle.encode(nine_shot(standin, seed).texts[:1])[0] for seed in (1, 2))
    demos = common_prefix([first, handle.encode(nine_shot(standin).texts[1:2])[0]])
    with torch.inference_mode():
        prefixes.beginning(handle, first[:demos], keep=[1])
        ran = standin.ledger.actual
        longer = prefixes.beginning(handle, first[: demos + 5], keep=[1])  # continues: 5 tokens more
        assert standin.ledger.actual - ran == 5 * standin.n_layers
        fresh = Past.beginning(handle, first[: demos + 5], keep=[1])
        for got, want in zip(longer.cache.layers, fresh.cache.layers):
            assert torch.allclose(got.keys, want.keys, atol=1e-5) and torch.allclose(got.values, want.values, atol=1e-5)
        assert torch.allclose(longer.states[1], fresh.states[1], atol=1e-5)
        ran = standin.ledger.actual
        prefixes.beginning(handle, second[:demos], keep=[1])  # the same demonstrations: nothing runs
        assert standin.ledger.actual == ran
        with torch.no_grad():  # weights changed in place: the kept beginning is stale
            standin.hf.lm_head.weight.mul_(1.0)
        prefixes.beginning(handle, second[:demos], keep=[1])
        assert standin.ledger.actual - ran == demos * standin.n_layers
