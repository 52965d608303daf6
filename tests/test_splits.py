"""Who uses which validation rows: at the papers' sizes the race vector's validation file still leaves the judicial
task its 500 pairs and every vector's causal check its held-out rows (the paper-size profile once stopped on both)."""

from __future__ import annotations

import pytest

from llmaudit.chapters.decision_tasks.judicial import JUDICIAL_CONVICTION, pairs
from llmaudit.chapters.steering_vectors.recipes import RECIPES, for_tasks, pool, rows, validation_size
from llmaudit.data import read_csv
from llmaudit.errors import AuditError


def test_dialect_pairs_are_split_whole_between_the_tasks_and_the_vector(mirror) -> None:
    frame = read_csv("llm-steering-audit/datasplits/dialect_val.csv", mirror)
    tasks = for_tasks("dialect", frame)
    assert 0.4 < tasks.mean() < 0.6  # about half each
    assert frame.groupby("pair_id").apply(lambda pair: tasks[pair.index].nunique()).eq(1).all()  # pairs stay whole
    judicial_rows = set(pairs(mirror)[["row_black", "row_white"]].stack())
    assert judicial_rows.isdisjoint(pool(RECIPES["race_dial"], "val", mirror)["_id"])
    assert not for_tasks("gendered_language", read_csv(
        "llm-steering-audit/datasplits/gendered_language_val.csv", mirror)).any()  # no task draws from it


def test_paper_size_judicial_task_keeps_its_500_pairs_whatever_the_vector_used(mirror) -> None:
    """The race vector validating on every row it may use, as a profile without val_rows does, excludes no pair."""
    recipe = RECIPES["race_dial"]
    used = rows(recipe, "val", validation_size(recipe, None, 64, mirror), 0, mirror)["_id"].tolist()
    items = JUDICIAL_CONVICTION.items("neutral", 500, 0, mirror, exclude=used)
    assert len({item.case for item in items}) == 500


@pytest.mark.parametrize("name", sorted(RECIPES))
def test_unset_validation_leaves_the_causal_check_its_rows(name, mirror) -> None:
    recipe = RECIPES[name]
    val = rows(recipe, "val", validation_size(recipe, None, 64, mirror), 0, mirror)
    held_out = rows(recipe, "val", 64, 0, mirror, exclude=val["_id"].tolist())
    assert len(held_out) == 64
    with pytest.raises(AuditError, match=f"steering.val_rows.{recipe.dataset} = .* leaves the causal check"):
        validation_size(recipe, len(pool(recipe, "val", mirror)), 64, mirror)
