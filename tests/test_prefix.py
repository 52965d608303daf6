"""The shared-prefix engine (models/passes/prefix.py) against the traced forward, each prompt whole: the common
beginning runs once and the prompts after it are packed as token trees (variants of one case, texts of one template), on
every supported architecture, with their sliding windows either covering the prompts (trees) or not (a prompt a row)."""

from __future__ import annotations

import pytest
import torch

from llmaudit.chapters.steering_vectors import SteeringVector
from llmaudit.ledger import Ledger
from llmaudit.models.loading import architectures
from llmaudit.models.passes.layers import every_position, reading
from llmaudit.models.passes.prefix import Branch, branches, forward_shared_prefix
from llmaudit.models.passes.states import LowerStates
from llmaudit.models.passes.sweep import split_sweep
from test_ledger import distinct_prefixes
from test_sweep_architectures import ARCHITECTURES, build_model

CASES = ("the nurse started a new job and said that it was good", "a doctor wrote about the teacher")


def variant_texts(model) -> list[str]:
    """Two templates x two cases x two gender variants, plus a prompt that shares only the chat beginning."""
    texts = [model.chat(f"{template} : {case} . {who} is the applicant", "answer :")
             for template in ("describe the person", "write one sentence about this person")
             for case in CASES for who in ("she", "he")]
    return texts + [model.chat("approve", "answer :")]


def test_branches_group_neighbours_while_sharing_saves_tokens() -> None:
    rest = [[1, 2, 3, 4, 5, 9], [1, 2, 3, 4, 5, 8], [7, 7, 7, 7, 7, 1], [1, 2, 3, 4, 6, 0], [7, 7, 7, 7, 7, 2]]
    assert branches(rest) == [Branch((1, 0, 3), 4), Branch((2, 4), 5)]  # 4 x 2 saved >= 5 x 1 before the third
    long_pair = [[1] * 10 + [2], [1] * 10 + [3], [1] * 4 + [5, 5]]
    assert branches(long_pair) == [Branch((0, 1), 10)]  # the third would save 4 x 2 < 10: left alone
    assert branches([[1, 2, 3, 9], [1, 2, 3, 8]]) == []  # three shared tokens are below MIN_BRANCH
    assert branches([[1, 2, 3, 4, 5], [1, 2, 3, 4, 5, 6]]) == [Branch((0, 1), 4)]  # each keeps a token of its own


@pytest.mark.parametrize("architecture", ARCHITECTURES)
@pytest.mark.parametrize("window", [None, 10_000])
def test_packed_forward_equals_the_traced_forward(architecture, window, tiny_model) -> None:
    model = tiny_model if architecture == "llama" else build_model(architecture)
    if window is not None and hasattr(model.hf.config, "sliding_window"):
        model.hf.config.sliding_window = window
    texts, labels = variant_texts(model), model.single_token_ids(["she", "he", "good"])
    want = model.forward(texts, labels, layers=[1, 3], traced=True)
    for budget in (4096, 60):  # all in one batch, and over several
        got = forward_shared_prefix(model.handle, texts, labels, layers=[1, 3], batch_tokens=budget)
        torch.testing.assert_close(got.probs, want.probs, atol=1e-5, rtol=1e-4)
        torch.testing.assert_close(got.acts, want.acts, atol=1e-4, rtol=1e-4)
    early = forward_shared_prefix(model.handle, texts, (), layers=[1], batch_tokens=60)  # activations only
    torch.testing.assert_close(early.acts, want.acts[:, :1], atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("architecture", ARCHITECTURES)
@pytest.mark.parametrize("window", [None, 10_000])
def test_kept_states_are_each_prompt_s_block_outputs_at_every_token(architecture, window, tiny_model) -> None:
    """The states the packed forward keeps (beginning and tree path put together) equal a block's output
    on each prompt alone, and start a sweep as the sweep's own kept states do."""
    model = tiny_model if architecture == "llama" else build_model(architecture)
    if window is not None and hasattr(model.hf.config, "sliding_window"):
        model.hf.config.sliding_window = window
    texts, labels = variant_texts(model), model.single_token_ids(["she", "he", "good"])
    for budget in (4096, 60):
        got = forward_shared_prefix(model.handle, texts, labels, batch_tokens=budget, keep=[1, 2]).states
        for block in (1, 2):
            for text, states in zip(texts, got[block]):
                ids = torch.tensor(model.encode([text]))
                with torch.inference_mode(), reading(architectures.blocks(model.hf), [block], every_position) as seen:
                    architectures.decoder(model.hf)(input_ids=ids)
                torch.testing.assert_close(states, seen[block][0], atol=1e-4, rtol=1e-4)
    vector = SteeringVector("v", "gender", 2, torch.nn.functional.normalize(torch.ones(model.width), dim=0),
                            torch.zeros(model.width), k=2.0)
    swept = split_sweep(model.handle, texts, labels, vector, [-1.0, 1.0], None, keep=1)
    for mine, theirs in zip(got[1], swept.states.states):
        torch.testing.assert_close(mine, theirs, atol=1e-4, rtol=1e-4)
    started = split_sweep(model.handle, texts, labels, vector, [-1.0, 1.0], None, start=LowerStates(1, got[1]))
    torch.testing.assert_close(started.probs, swept.probs, atol=1e-5, rtol=0)


def test_token_trees_bring_the_forward_to_the_minimum(tiny_model) -> None:
    """Variants that differ only in their last token, cases of one length: every token runs once, as the ledger's
    minimum asks (no padding)."""
    model = tiny_model
    texts = [model.chat(f"the applicant wrote about the new job . {case} . the applicant is {who}")
             for case in ("the nurse wrote about the teacher", "a doctor said it was good")
             for who in ("she", "he")]
    encoded = model.encode(texts)
    assert len({len(e) for e in encoded}) == 1
    model.ledger = Ledger(model.n_layers)
    forward_shared_prefix(model.handle, texts, [5, 6], batch_tokens=4096)
    ledger = model.ledger
    assert ledger.minimum == distinct_prefixes(encoded) * model.n_layers
    assert ledger.actual == ledger.minimum
