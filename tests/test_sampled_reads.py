"""Sampled mode's rules (`chapters.decision_tasks.reading`): an answer is the first word of the sampled text when it
is an answer word, case aside; the answers per prompt follow from the gaps' margin and the cases, at least the main
paper's five and at most the params' cap."""

from __future__ import annotations

import math

import pytest

from llmaudit.chapters.decision_tasks.reading import Z, answer_of, samples_per_prompt


@pytest.mark.parametrize("text, answer", [(" Bad credit.", 1), ("good", 0), ("\n**GOOD**", 0), (" Goodness", None),
                                          (" maybe bad", None), ("", None)])
def test_an_answer_is_the_first_word_when_it_is_an_answer_word(text, answer):
    assert answer_of(text, ("Good", "Bad")) == answer


def test_samples_per_prompt_keep_the_gaps_sampling_error_within_half_its_margin():
    n = samples_per_prompt(0.02, 500, 1000)  # the paper's 500 judicial cases at epsilon.gap's 0.02
    assert n == 39
    assert Z * math.sqrt(1 / (2 * n * 500)) <= 0.01 < Z * math.sqrt(1 / (2 * (n - 1) * 500))
    assert samples_per_prompt(0.02, 4, 100) == 100 and samples_per_prompt(0.5, 500, 100) == 5
