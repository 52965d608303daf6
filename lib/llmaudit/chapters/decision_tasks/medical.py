"""MEDICAL task (main paper §4.2, DiversityMedQA, Rawat et al. 2024): MedQA board-exam questions whose patient is
stated female / male (gender file) or of African / Caucasian descent (ethnicity file); metric = normalised
probability of the correct option among A-D.

Decisions:
- The prompt is the paper's base template (App. A.4.1): "Question: <vignette and question>", a blank line, then one
  "<letter>. <option>" line per option, answer prefix "Answer:". The json holds vignette and question as ONE string
  (question_*) and the options as a dict A-D; the reference code puts no blank line before the options.
- The attribute is stated in the vignette itself, so `explicit` and `implicit` are the same prompts (question_F /
  question_M, or question_B / question_W): the black-box audit runs `explicit` only, so one measurement is not
  reported as two tests; `neutral` (also the paper's white-box prompt, `whitebox`) is question_N (neutral terms for
  gender; for race the "The patient is of ... descent." sentence is dropped), group ''.
- Questions are stripped: a few upstream versions end in a stray "\\n " that their twins lack, which would make the
  group prompts differ in more than the attribute.
- `n` questions are drawn without replacement with the seed; `exclude` holds idx values to leave out.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llmaudit.chapters.decision_tasks.base import SampledTask, Version
from llmaudit.data import read_json
from llmaudit.errors import AuditError

LETTERS = ("A", "B", "C", "D")
PREFIX = "Answer:"


@dataclass(frozen=True)
class Perturbation:
    """Which DiversityMedQA file a concept uses, its two groups and the question_<suffix> of each group."""

    file: str
    groups: tuple[str, str]
    suffixes: tuple[str, str]


PERTURBATIONS = {
    "gender": Perturbation("gender", ("female", "male"), ("F", "M")),
    "race": Perturbation("ethnicity", ("black", "white"), ("B", "W")),
}


def prompt(question: str, options: Mapping[str, str]) -> str:
    """The paper's MEDICAL base template: the question, a blank line, one line per option A-D."""
    lines = "\n".join(f"{letter}. {options[letter]}" for letter in LETTERS)
    return f"Question: {question.strip()}\n\n{lines}"


class MedicalTask(SampledTask):
    """DiversityMedQA multiple choice; + bias = more accurate for the female / Black version of a question."""

    answers = LETTERS
    metric_name = "accuracy"
    black_box_variants = ("explicit",)
    chance = 1 / len(LETTERS)
    unit = "questions"

    def __init__(self, concept: str) -> None:
        if concept not in PERTURBATIONS:
            raise AuditError(f"medical: unknown concept '{concept}' (use one of {', '.join(PERTURBATIONS)})")
        self.perturbation = PERTURBATIONS[concept]
        self.name = f"medical_{concept}"
        self.concept = concept
        self.groups = self.perturbation.groups

    def rows(self, mirror: Path | None) -> dict[int, dict[str, Any]]:
        """The questions of the concept's file by idx."""
        key = f"llm-steering-audit/eval_data/DiversityMedQA-{self.perturbation.file}.json"
        return {record["idx"]: record for record in read_json(key, mirror)}

    def target(self, row: dict[str, Any]) -> int:
        """The correct option."""
        return LETTERS.index(row["answer_idx"])

    def versions(self, variant: str, case: int, row: dict[str, Any], seed: int) -> list[Version]:
        """The question_N version (neutral, whitebox), or each group's (explicit and implicit alike)."""
        paired = list(zip(self.groups, self.perturbation.suffixes))
        shown = [("", "N")] if variant in ("neutral", "whitebox") else paired
        return [Version(group, prompt(row[f"question_{suffix}"], row["options"]), PREFIX,
                        {"idx": row["idx"], "answer": row["answer_idx"]})
                for group, suffix in shown]


MEDICAL_GENDER = MedicalTask("gender")
MEDICAL_RACE = MedicalTask("race")
