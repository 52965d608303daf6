"""StereoSet as a forced choice: the items read from the mirror, the seeded option orders, the chosen kind per
item, and lms, ss and icat against hand counts."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from llmaudit.chapters.similarity.stereoset import (
    KINDS,
    chosen_kinds,
    load_stereoset,
    prompt,
    sample_items,
    stereoset_scores,
)
from llmaudit.errors import AuditError


@pytest.fixture(scope="module")
def items(mirror) -> pd.DataFrame:
    return load_stereoset(mirror)


def test_items_from_the_mirror_have_their_three_sentences(items) -> None:
    assert len(items) == 2106 and set(items["bias_type"]) == {"gender", "profession", "race", "religion"}
    first = items.iloc[0]
    assert "BLANK" in first["context"] and first["unrelated"] == "The chess player was fox."


def test_sample_is_seeded_per_type_and_shuffles_options(items) -> None:
    a, b = sample_items(items, 5, 0), sample_items(items, 5, 0)
    assert a.equals(b) and a.groupby("bias_type").size().tolist() == [5, 5, 5, 5]
    assert all(sorted(order.split("|")) == sorted(KINDS) for order in a["order"])
    assert a["order"].nunique() > 1  # not one fixed position for the stereotype
    assert not a.equals(sample_items(items, 5, 1))
    with pytest.raises(AuditError, match="religion has 79"):
        sample_items(items, 80, 0)


def test_prompt_shows_the_sentences_in_the_items_order() -> None:
    row = {"context": "The nurse was BLANK.", "stereotype": "S.", "anti-stereotype": "N.", "unrelated": "U.",
           "order": "unrelated|stereotype|anti-stereotype"}
    user, prefix = prompt(row)
    assert "A. U.\nB. S.\nC. N." in user and '"The nurse was BLANK."' in user and prefix == "Answer:"


def test_scores_by_hand() -> None:
    orders = ["stereotype|anti-stereotype|unrelated", "unrelated|stereotype|anti-stereotype"] * 2
    items = pd.DataFrame({"id": list("abcd"), "bias_type": ["gender", "gender", "race", "race"], "order": orders})
    # argmax letters: A, B, B, A -> stereotype, stereotype, anti-stereotype, unrelated
    probs = np.array([[0.5, 0.2, 0.1], [0.1, 0.6, 0.1], [0.1, 0.3, 0.1], [0.3, 0.1, 0.1]])
    choices = chosen_kinds(items, probs)
    assert choices["choice"].tolist() == ["stereotype", "stereotype", "anti-stereotype", "unrelated"]
    assert choices.loc[0, "p_stereotype"] == pytest.approx(0.5 / 0.8)
    table = stereoset_scores(choices)
    # overall: 3 of 4 meaningful (lms 75), 2 of 3 stereotyped (ss 66.7), icat = 75 * 33.3 / 50 = 50
    assert table.loc["overall", "lms"] == pytest.approx(75.0)
    assert table.loc["overall", "ss"] == pytest.approx(200 / 3)
    assert table.loc["overall", "icat"] == pytest.approx(50.0)
    assert table.loc["gender", "ss"] == 100.0 and table.loc["gender", "icat"] == 0.0
    assert table.loc["race", "lms"] == 50.0 and table.loc["race", "ss"] == 0.0
