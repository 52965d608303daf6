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
- Variants: `implicit` shows both texts of a pair (groups black, white), and so does `whitebox`, the paper's
  white-box prompt (Table 1: the utterance is an implicit variable, kept; Fig. 2 steers both speaker groups);
  `explicit` fills the *_explicit template with each race word ("Black" / "White", capitalised; the reference code
  writes them lower-case) over each text, four prompts per pair as the reference code crosses them, so the gap
  averages over the dialects; `neutral` is the plain template with the WME / SAE text alone (group ''), the concept
  removed from the prompt: the white side of the whitebox sweep, so it costs no pass of its own.
  `meta["dialect"]` names the text shown (black: AAL / AAVE, white: WME / SAE).
- The metric reads the next-token probabilities of the two answer words after the prefix, not five sampled
  completions parsed by regular expressions.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from llmaudit.chapters.decision_tasks.base import SampledTask, Version
from llmaudit.chapters.steering_vectors.recipes import for_tasks
from llmaudit.data import read_csv, read_json
from llmaudit.errors import AuditError

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


class Pair(NamedTuple):
    """One dialect pair (row ids and texts of its Black- and white-dialect sides), with the subtask's templates by
    judicial.json key."""

    row_black: int
    text_black: str
    row_white: int
    text_white: str
    templates: dict[str, list[tuple[str, str]]]


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


def pronoun(seed: int, pair_id: int) -> int:
    """Index of a pair's pronoun (and so of its templates), drawn from (seed, pair_id) whatever else is drawn."""
    return int(np.random.default_rng([seed, pair_id]).integers(len(PRONOUNS)))


class JudicialTask(SampledTask):
    """Conviction or death-penalty decisions on dialect pairs; + bias = harsher on the Black-dialect / Black side."""

    concept = "race"
    groups = ("black", "white")
    source = "dialect"
    unit = "pairs"
    size = 500  # main paper §4.2: "We sample 500 WME and AAL sentence pairs"

    def __init__(self, subtask: str) -> None:
        if subtask not in SUBTASKS:
            raise AuditError(f"judicial: unknown subtask '{subtask}' (use one of {', '.join(SUBTASKS)})")
        spec = SUBTASKS[subtask]
        self.name = f"judicial_{subtask}"
        self.key = spec.key
        self.answers = spec.answers
        self.scored = spec.target
        self.metric_name = spec.metric_name

    def rows(self, mirror: Path | None) -> dict[int, Pair]:
        """The pairs by pair_id."""
        table = {key: templates(key, mirror) for key in (self.key, f"{self.key}_explicit")}
        return {int(p.pair_id): Pair(int(p.row_black), p.text_black, int(p.row_white), p.text_white, table)
                for p in pairs(mirror).itertuples(index=False)}

    def sources(self, case: int, row: Pair) -> set[int]:
        """Both rows of the pair."""
        return {row.row_black, row.row_white}

    def versions(self, variant: str, case: int, row: Pair, seed: int) -> list[Version]:
        """Both texts (implicit, whitebox), each race stated over each text (explicit), or the white-dialect text
        alone (neutral)."""
        which = pronoun(seed, case)
        meta = {"pronoun": PRONOUNS[which], "pair_id": case, "row_black": row.row_black, "row_white": row.row_white}
        if variant in ("implicit", "whitebox"):
            shown: list[tuple[str, str, str, tuple[Any, ...]]] = [
                (side, side, self.key, (getattr(row, f"text_{side}"),)) for side in self.groups]
        elif variant == "explicit":
            shown = [(group, side, f"{self.key}_explicit", (RACE_WORDS[group], getattr(row, f"text_{side}")))
                     for group in self.groups for side in self.groups]
        else:
            shown = [("", "white", self.key, (row.text_white,))]
        return [Version(group, row.templates[key][which][0].format(*values), row.templates[key][which][1],
                        {**meta, "dialect": side})
                for group, side, key, values in shown]


JUDICIAL_CONVICTION = JudicialTask("conviction")
JUDICIAL_PENALTY = JudicialTask("penalty")
