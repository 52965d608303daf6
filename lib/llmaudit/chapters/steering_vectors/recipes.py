"""Which data makes which vector (main paper §4.1), and how a data row becomes a concept-scoring prompt."""

from __future__ import annotations

import hashlib
import random
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from llmaudit.data import read_csv, read_text
from llmaudit.errors import AuditError

SPLITS = "llm-steering-audit/datasplits"


@dataclass(frozen=True)
class Recipe:
    """A steering vector's concept, training data set, instruction templates and the row label shown in plots."""

    name: str
    concept: str
    dataset: str
    instructions: str
    label: str


RECIPES = {
    r.name: r
    for r in (
        Recipe("gender_lang", "gender", "gendered_language", "gendered_language", "gender_label"),
        Recipe("race_dial", "race", "dialect", "dialect", "label"),
        Recipe("race_id", "race", "racial_identity", "racial_identity", "self_identified_race"),
        Recipe("gender_id", "gender", "racial_identity", "gender_identity", "gender"),
    )
}

# The audit's two vectors per concept: the first steers the decision tasks, the second checks that the finding does
# not depend on which data made the direction (robustness chapter).
CONCEPT_VECTORS = {"gender": ("gender_lang", "gender_id"), "race": ("race_dial", "race_id")}


def templates(name: str, mirror: Path | None = None) -> list[tuple[str, str]]:
    """(instruction with '{}', output prefix) pairs from instructions/<name>.txt."""
    lines = read_text(f"llm-steering-audit/instructions/{name}.txt", mirror).strip().splitlines()
    pairs = [line.split(" | ") for line in lines if line.strip()]
    return [(inst.replace("\\n", "\n"), prefix.strip()) for inst, prefix in pairs]


# Validation files that a decision task also draws its cases from, with the column naming a case: the judicial task's
# dialect pairs (main paper §4.2: "the validation split that does not overlap with those used to extract the race
# vector"). Such a file is split once, by case, into a half for the tasks and a half for the vectors.
TASK_CASES = {"dialect": "pair_id"}


def for_tasks(dataset: str, frame: pd.DataFrame) -> pd.Series:
    """Whether each row of `dataset`'s validation file is in the decision tasks' half: the cases (TASK_CASES) whose id
    hashes even, a fixed split whatever the sizes and seed; none for a file no task draws from."""
    column = TASK_CASES.get(dataset)
    if column is None:
        return pd.Series(False, index=frame.index)
    return frame[column].map(lambda case: hashlib.sha256(f"{dataset}:{case}".encode()).digest()[0] % 2 == 0)


def held_for_tasks(recipe: Recipe, mirror: Path | None = None) -> int:
    """How many rows of the vector's validation file are the decision tasks' (`for_tasks`)."""
    frame = read_csv(f"{SPLITS}/{recipe.dataset}_val.csv", mirror)
    return int(for_tasks(recipe.dataset, frame).sum())


def pool(recipe: Recipe, split: str, mirror: Path | None = None) -> pd.DataFrame:
    """The rows of a data split the vectors may use: all training rows; the validation rows outside the tasks' half."""
    frame = read_csv(f"{SPLITS}/{recipe.dataset}_{split}.csv", mirror)
    return frame[~for_tasks(recipe.dataset, frame)] if split == "val" else frame


def validation_size(recipe: Recipe, requested: int | None, check_rows: int, mirror: Path | None = None) -> int:
    """Validation rows for the vector of `recipe`: `requested`, or when None every row of its pool but the `check_rows`
    that the causal check holds out; a request that leaves the check fewer rows is a one-line AuditError."""
    spare = len(pool(recipe, "val", mirror)) - check_rows
    if requested is None:
        return spare
    if requested > spare:
        raise AuditError(f"steering.val_rows.{recipe.dataset} = {requested} leaves the causal check fewer than its "
                         f"check_rows ({check_rows}) of the vector's {spare + check_rows} validation rows: set it to "
                         f"at most {spare}, or leave it unset")
    return requested


def rows(
    recipe: Recipe, split: str, n: int | None, seed: int, mirror: Path | None = None, exclude: Collection[int] = ()
) -> pd.DataFrame:
    """`n` rows (all when None) of a data split's `pool`, sampled without replacement from those whose `_id` is not in
    `exclude`, each with its instruction template (index, instruction, prefix) assigned round-robin over a seeded
    shuffle (every template used equally often)."""
    frame = pool(recipe, split, mirror)
    frame = frame[~frame["_id"].isin(list(exclude))]
    if n is not None and n < len(frame):
        frame = frame.sample(n=n, random_state=seed)
    frame = frame.reset_index(drop=True)
    pairs = templates(recipe.instructions, mirror)
    order = list(range(len(pairs)))
    random.Random(seed).shuffle(order)
    chosen = [order[i % len(order)] for i in range(len(frame))]
    return frame.assign(
        template=chosen,
        instruction=[pairs[t][0].format(text) for t, text in zip(chosen, frame["text"])],
        prefix=[pairs[t][1] for t in chosen],
        group=frame[recipe.label].astype(str),
    )
