"""The framing and markedness chapters' glue: label-space reading of pronoun mass against an independent
full-vocabulary computation, option-order versions, probe-set sampling and agreement with the unmarked sentence."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from llmaudit.chapters.framing.evaluate import (
    sampled_pass,
    sampler_decoding,
    steered_probabilities,
    texts,
    token_probabilities,
    versions,
)
from llmaudit.chapters.framing.pronouns import family_probs, family_token_ids
from llmaudit.chapters.framing.stimuli import prompts
from llmaudit.chapters.markedness.evaluate import agreement_with_unmarked
from llmaudit.chapters.markedness.prompts import GROUP_TERMS, UNMARKED, probe_set
from llmaudit.chapters.steering_vectors import SteeringVector
from llmaudit.models.loading import architectures
from llmaudit.models.passes.layers import hidden
from llmaudit.models.passes.prefix import common_prefix


def test_pronoun_shares_equal_a_full_vocabulary_computation(bind, tiny_model) -> None:
    bind(tiny_model, batch_tokens=256)
    cells = versions(prompts("a moustache"), range(3))
    frame = token_probabilities(tiny_model, cells, "chat")
    vocabulary = tiny_model.forward(texts(tiny_model, cells, "chat"), None).probs
    expected = torch.cat([family_probs(row[None], family_token_ids(tiny_model.tokenizer, p.letters), log=False)
                          for row, p in zip(vocabulary, cells)])
    assert torch.allclose(torch.tensor(frame[["he", "she", "they"]].to_numpy()).double(), expected.double(), atol=1e-5)
    assert len(frame) == sum(3 if p.kind == "choice" else 1 for p in prompts("a moustache"))


def test_the_sampled_pass_scores_what_token_probabilities_scores_and_samples_each_cell(bind, tiny_model,
                                                                                       tmp_path) -> None:
    bind(tiny_model, batch_tokens=256, cache=tmp_path)
    cells, samples = prompts("a moustache"), 3
    vector = SteeringVector("v", "gender", 1, torch.nn.functional.normalize(torch.ones(tiny_model.width), dim=0),
                            torch.zeros(tiny_model.width), k=3.0)
    release = sampler_decoding(tiny_model, "release")  # the paper's design: plain form, the release decoding
    scored, answers = sampled_pass(tiny_model, cells, samples, 4, seed=0, form="plain", decoding=release,
                                   vector=vector)
    alone = token_probabilities(tiny_model, versions(cells, range(samples)), "plain", vector=vector)
    pd.testing.assert_frame_equal(scored, alone, atol=1e-6)
    assert len(answers) == samples * len(cells)
    assert answers.groupby(["task", "gender", "instr"]).size().eq(samples).all()
    before = tiny_model.ledger.actual
    again, same = sampled_pass(tiny_model, cells, samples, 4, seed=0, form="plain", decoding=release, vector=vector)
    assert tiny_model.ledger.actual == before  # every batch from the cache
    pd.testing.assert_frame_equal(again, scored)
    pd.testing.assert_frame_equal(same, answers)


def test_a_chat_pass_without_completion_prompts_keeps_nothing(bind, tiny_model, tmp_path) -> None:
    """Our alternative design: the chat form, temperature 1 over the whole vocabulary."""
    bind(tiny_model, batch_tokens=256, cache=tmp_path)
    choice = [p for p in prompts("a moustache") if p.kind == "choice"]
    vector = SteeringVector("v", "gender", 1, torch.nn.functional.normalize(torch.ones(tiny_model.width), dim=0),
                            torch.zeros(tiny_model.width), k=3.0)
    scored, answers = sampled_pass(tiny_model, choice, 2, 4, seed=0, form="chat",
                                   decoding=sampler_decoding(tiny_model, "full_vocabulary"), vector=vector)
    assert len(answers) == 2 * len(choice) and len(scored) == 2 * len(choice)


@pytest.mark.parametrize("after_sampled_pass", [False, True])
def test_steered_shares_equal_the_plain_steered_forward(bind, tiny_model, tmp_path, after_sampled_pass) -> None:
    bind(tiny_model, batch_tokens=256, cache=tmp_path)
    cells = prompts("a moustache")
    free = [p for p in cells if p.kind == "completion"]
    vector = SteeringVector("v", "gender", 1, torch.nn.functional.normalize(torch.ones(tiny_model.width), dim=0),
                            torch.zeros(tiny_model.width), k=3.0)
    if after_sampled_pass:  # the sampled pass keeps the completion prompts' states below the edit: the sweep starts
        # there
        sampled_pass(tiny_model, cells, 3, 4, seed=0, form="plain", decoding=sampler_decoding(tiny_model, "release"),
                     vector=vector)
    first: list[int] = []  # token positions the first block runs on
    hook = architectures.blocks(tiny_model.hf)[0].register_forward_hook(lambda m, a, out: first.append(
        hidden(out).shape[0] * hidden(out).shape[1]))
    try:
        steered = steered_probabilities(tiny_model, free, vector, [-1.0, 1.0], form="plain")
    finally:
        hook.remove()
    inputs = texts(tiny_model, free, "plain")
    beginning = common_prefix(tiny_model.encode(inputs))  # run once from its tokens, to cache its keys and values
    assert (sum(first) == beginning) == after_sampled_pass  # from the states, no prompt's own token ran below the edit
    for lam in (-1.0, 1.0):
        vocabulary = tiny_model.forward(inputs, None, intervention=vector.intervention(lam)).probs
        expected = torch.cat([family_probs(row[None], family_token_ids(tiny_model.tokenizer, p.letters), log=False)
                              for row, p in zip(vocabulary, free)])
        got = steered.loc[steered["lam"] == lam, ["he", "she", "they"]].to_numpy()
        assert torch.allclose(torch.tensor(got).double(), expected.double(), atol=1e-5)
    assert not np.allclose(steered.loc[steered["lam"] == -1.0, "she"], steered.loc[steered["lam"] == 1.0, "she"])


def test_choice_versions_reshuffle_and_completions_stay_single() -> None:
    cells = prompts("long hair")
    shown = versions(cells, range(4))
    choice = [p for p in shown if p.task == "multiple_choice" and p.gender]
    assert len(choice) == 4 and len({p.text for p in choice}) > 1
    assert len([p for p in shown if p.task == "association"]) == 4


def test_probe_set_keeps_whole_templates(mirror) -> None:
    found = probe_set("regard", mirror, 5, seed=0)
    templates = {e.template for e in found}
    assert len(templates) == 5 and len(found) == 5 * (len(GROUP_TERMS) + 1)
    assert sum(e.group == UNMARKED for e in found) == 5
    assert {e.template for e in probe_set("regard", mirror, 5, seed=0)} == templates
    assert {e.template for e in probe_set("regard", mirror, 5, seed=1)} != templates
    every = probe_set("amazon", mirror, 4, seed=0, all_terms=True)
    assert len(every) == 4 * sum(len(t) for t in GROUP_TERMS.values())


def test_agreement_with_unmarked_counts_matching_templates() -> None:
    frame = pd.DataFrame(
        [("1", t, g, p) for t, preds in enumerate([("neutral", "neutral", "negative"), ("positive", "positive",
                                                                                        "positive")])
         for g, p in zip((UNMARKED, "white", "asian"), preds)],
        columns=["run", "template", "group", "pred"],
    )
    shares = agreement_with_unmarked(frame, UNMARKED).set_index("group")["agrees"]
    assert shares["white"] == pytest.approx(1.0) and shares["asian"] == pytest.approx(0.5)
