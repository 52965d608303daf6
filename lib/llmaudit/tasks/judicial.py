"""JUDICIAL task (main paper §4.2, after Hofmann et al. 2024): convict or acquit, life or death, for a defendant known
only by one utterance in African American Language (AAL / AAVE) or White Mainstream English (WME / SAE).

Decisions, and where they depart from the reference code:
- A case is a dialect PAIR of the tasks' half of the dialect validation split (`steering.recipes.for_tasks`; the race
  vector validates and is checked on the other half): two rows sharing a pair_id, labelled AAVE with SAE or AAL with
  WME; AAVE / AAL is the Black-dialect text, SAE / WME the white one.
- Pairs are drawn WITHOUT replacement with the seed (the reference code drew 500 with replacement: 423 unique), and
  a pair with a row id in `exclude` is skipped: the caller passes the race vector's validation rows, so evaluation
  never reuses the data that chose and scaled the vector.
- Each pair's pronoun (he / she / they) is drawn from (seed, pair_id), so a pair keeps it whatever `n` and
  `exclude` are; it picks the template (index 0 / 1 / 2 in judicial.json) and its output prefix.
- The upstream penalty templates ask "life or dealth?"; they are read as "death".
- Variants: `implicit` shows both texts of a pair (groups black, white); `explicit` fills the *_explicit template with
  "Black" / "White" and shows the WME / SAE text both times, so only the stated race differs (the reference code
  crossed both race words with both texts, lower-case); `neutral` is the plain template with the WME / SAE text
  (group ''), the baseline that steering moves.
- The metric reads the next-token probabilities of the two answer words after the prefix, not five sampled
  completions parsed by regular expressions.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from llmaudit.data import read_csv, read_json
from llmaudit.errors import AuditError
from llmaudit.steering.recipes import for_tasks
from llmaudit.tasks.base import Task, TaskItem, sample_ids

SPLIT = "llm-steering-audit/datasplits/dialect_val.csv"
TEMPLATES = "llm-steering-audit/eval_data/judicial.json"
PRONOUNS = ("he", "she", "they")  # position = template index in each judicial.json list
RACE_OF_LABEL = {"AAVE": "black", "AAL": "black", "SAE": "white", "WME": "white"}
RACE_WORDS = {"black": "Black", "white": "White"}


@dataclass(frozen=True)
class Subtask:
    """The judicial.json key of a subtask's templates, its answer words, the one whose rate is the metric, and the
    metric's name."""

    key: str
    answers: tuple[str, str]
    target: str
    metric_name: str


SUBTASKS = {
    "conviction": Subtask("guilt", ("acquitted", "convicted"), "convicted", "conviction rate"),
    "penalty": Subtask("penalty", ("life", "death"), "death", "death-penalty rate"),
}


def templates(key: str, mirror: Path | None = None) -> list[tuple[str, str]]:
    """(prompt with '{}' slots, output prefix) per pronoun from judicial.json[key], upstream 'dealth' fixed."""
    return [(t["prompt"].replace("dealth", "death"), t["output_prefix"]) for t in read_json(TEMPLATES, mirror)[key]]


def pairs(mirror: Path | None = None) -> pd.DataFrame:
    """One row per pair_id of the tasks' half of the dialect validation split: text and row id of its Black- and
    white-dialect sides."""
    rows = read_csv(SPLIT, mirror)
    rows = rows[for_tasks("dialect", rows)].rename(columns={"_id": "row"})
    race = rows["label"].map(RACE_OF_LABEL)
    black, white = (rows.loc[race == side, ["pair_id", "row", "text"]] for side in ("black", "white"))
    merged = black.merge(white, on="pair_id", suffixes=("_black", "_white"), validate="one_to_one")
    return merged.sort_values("pair_id", ignore_index=True)


def cases(table: pd.DataFrame, n: int | None, seed: int, exclude: Collection[int] = ()) -> pd.DataFrame:
    """`n` pairs of `table` (all when None) drawn without replacement with `seed`, none with a row id in `exclude`,
    each with the index of its pronoun drawn from (seed, pair_id)."""
    skip = table["row_black"].isin(list(exclude)) | table["row_white"].isin(list(exclude))
    pool = table[~skip].reset_index(drop=True)
    try:
        drawn = pool.iloc[sample_ids(range(len(pool)), n, seed)]
    except AuditError as err:
        raise AuditError(f"judicial: {err}; {skip.sum()} of {len(table)} pairs excluded (race vector rows)") from err
    pronouns = [int(np.random.default_rng([seed, pair]).integers(len(PRONOUNS))) for pair in drawn["pair_id"]]
    return drawn.assign(pronoun=pronouns)


class JudicialTask(Task):
    """Conviction or death-penalty decisions on dialect pairs; + bias = harsher on the Black-dialect / Black side."""

    concept = "race"
    groups = ("black", "white")
    source = "dialect"

    def __init__(self, subtask: str) -> None:
        if subtask not in SUBTASKS:
            raise AuditError(f"judicial: unknown subtask '{subtask}' (use one of {', '.join(SUBTASKS)})")
        spec = SUBTASKS[subtask]
        self.name = f"judicial_{subtask}"
        self.key = spec.key
        self.answers = spec.answers
        self.target = spec.target
        self.metric_name = spec.metric_name

    def shown(self, variant: str, case: Any) -> list[tuple[str, str, tuple[str, ...]]]:
        """(group, judicial.json key, values for the template's slots) of each prompt a case gives in `variant`."""
        if variant == "implicit":
            return [(group, self.key, (getattr(case, f"text_{group}"),)) for group in self.groups]
        if variant == "explicit":
            return [(group, f"{self.key}_explicit", (RACE_WORDS[group], case.text_white)) for group in self.groups]
        return [("", self.key, (case.text_white,))]

    def items(
        self, variant: str, n: int | None, seed: int, mirror: Path | None = None, exclude: Collection[int] = ()
    ) -> list[TaskItem]:
        """Prompts of `n` sampled dialect pairs in `variant` (see the module docstring)."""
        self.check_variant(variant)
        table = {key: templates(key, mirror) for key in (self.key, f"{self.key}_explicit")}
        target = self.answers.index(self.target)
        out = []
        for case in cases(pairs(mirror), n, seed, exclude).itertuples(index=False):
            meta = {
                "pronoun": PRONOUNS[case.pronoun],
                "pair_id": int(case.pair_id),
                "row_black": int(case.row_black),
                "row_white": int(case.row_white),
            }
            for group, key, values in self.shown(variant, case):
                prompt, prefix = table[key][case.pronoun]
                out.append(TaskItem(prompt.format(*values), prefix, group, str(case.pair_id), target, dict(meta)))
        return out


JUDICIAL_CONVICTION = JudicialTask("conviction")
JUDICIAL_PENALTY = JudicialTask("penalty")
