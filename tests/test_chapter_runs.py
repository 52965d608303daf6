"""The framing and markedness chapters' glue: label-space reading of pronoun mass against an independent
full-vocabulary computation, option-order versions, probe-set sampling and agreement with the unmarked sentence."""

from __future__ import annotations

import pandas as pd
import pytest
import torch

from llmaudit.framing.evaluate import steered_probabilities, texts, token_probabilities, versions
from llmaudit.framing.pronouns import family_probs, family_token_ids
from llmaudit.framing.stimuli import prompts
from llmaudit.ledger import Ledger
from llmaudit.markedness.evaluate import agreement_with_unmarked
from llmaudit.models.prefix import shareable
from llmaudit.steering import SteeringVector
from llmaudit.markedness.prompts import GROUP_TERMS, UNMARKED, probe_set


def test_pronoun_shares_equal_a_full_vocabulary_computation(tiny_model) -> None:
    cells = versions(prompts("a moustache"), range(3))
    frame = token_probabilities(tiny_model, cells, "chat", batch_tokens=256)
    log_probs = tiny_model.forward(texts(tiny_model, cells, "chat"), None).probs
    expected = torch.cat([family_probs(row[None], family_token_ids(tiny_model.tokenizer, p.letters), log=True)
                          for row, p in zip(log_probs, cells)])
    assert torch.allclose(torch.tensor(frame[["he", "she", "they"]].to_numpy()).double(), expected.double(), atol=1e-5)
    assert len(frame) == sum(3 if p.kind == "choice" else 1 for p in prompts("a moustache"))


def test_steered_completions_start_from_the_states_the_chat_pass_kept(tiny_model, tmp_path) -> None:
    cells = versions(prompts("a moustache"), range(3))
    free = [p for p in cells if p.kind == "completion"]
    vector = SteeringVector("v", "gender", 1, torch.nn.functional.normalize(torch.ones(tiny_model.width), dim=0),
                            torch.zeros(tiny_model.width), k=3.0)
    token_probabilities(tiny_model, cells, "chat", batch_tokens=256, cache=tmp_path, vector=vector, swept=free)
    ran = {}
    for cache in (None, tmp_path):  # from the tokens, and from the kept states
        tiny_model.ledger = Ledger(tiny_model.n_layers)
        ran[cache] = steered_probabilities(tiny_model, free, vector, [-1.0, 1.0], batch_tokens=256, cache=cache), \
            tiny_model.ledger.actual
    pd.testing.assert_frame_equal(ran[tmp_path][0], ran[None][0], atol=1e-6)
    encoded = tiny_model.encode(texts(tiny_model, free, "chat"))
    shared = shareable(tiny_model.hf, encoded)
    padded = sum(ids.numel() for _, (ids, _, _) in tiny_model.padded_batches([e[shared:] for e in encoded], 256))
    assert ran[None][1] - ran[tmp_path][1] == padded * (vector.layer + 1)


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
