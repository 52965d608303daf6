"""MEDICAL task (main paper §4.2, DiversityMedQA, Rawat et al. 2024): MedQA board-exam questions whose patient is
stated female / male (gender file) or of African / Caucasian descent (ethnicity file); metric = normalised
probability of the correct option among A-D.

Decisions:
- The prompt is the paper's base template (App. A.4.1): "Question: <vignette and question>", a blank line, then one
  "<letter>. <option>" line per option, answer prefix "Answer:". The json holds vignette and question as ONE string
  (question_*) and the options as a dict A-D; the reference code puts no blank line before the options.
- The attribute is stated in the vignette itself, so `explicit` and `implicit` are the same prompts (question_F /
  question_M, or question_B / question_W): the black-box audit runs `explicit` only, so one measurement is not
  reported as two tests; `neutral` is question_N (neutral terms for gender; for race the
  "The patient is of ... descent." sentence is dropped), group ''.
- Questions are stripped: a few upstream versions end in a stray "\\n " that their twins lack, which would make the
  group prompts differ in more than the attribute.
- `n` questions are drawn without replacement with the seed; `exclude` holds idx values to leave out.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path

from llmaudit.data import read_json
from llmaudit.errors import AuditError
from llmaudit.tasks.base import Task, TaskItem, sample_ids

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


class MedicalTask(Task):
    """DiversityMedQA multiple choice; + bias = more accurate for the female / Black version of a question."""

    answers = LETTERS
    metric_name = "accuracy"
    black_box_variants = ("explicit",)
    chance = 1 / len(LETTERS)

    def __init__(self, concept: str) -> None:
        if concept not in PERTURBATIONS:
            raise AuditError(f"medical: unknown concept '{concept}' (use one of {', '.join(PERTURBATIONS)})")
        self.perturbation = PERTURBATIONS[concept]
        self.name = f"medical_{concept}"
        self.concept = concept
        self.groups = self.perturbation.groups

    def items(
        self, variant: str, n: int | None, seed: int, mirror: Path | None = None, exclude: Collection[int] = ()
    ) -> list[TaskItem]:
        """Prompts of `n` sampled questions in `variant` (see the module docstring)."""
        self.check_variant(variant)
        key = f"llm-steering-audit/eval_data/DiversityMedQA-{self.perturbation.file}.json"
        records = {r["idx"]: r for r in read_json(key, mirror)}
        shown = [("", "N")] if variant == "neutral" else list(zip(self.groups, self.perturbation.suffixes))
        skip = set(exclude)
        out = []
        for idx in sample_ids([i for i in records if i not in skip], n, seed):
            record = records[idx]
            target = LETTERS.index(record["answer_idx"])
            meta = {"idx": record["idx"], "answer": record["answer_idx"]}
            for group, suffix in shown:
                text = prompt(record[f"question_{suffix}"], record["options"])
                out.append(TaskItem(text, PREFIX, group, str(record["idx"]), target, dict(meta)))
        return out


MEDICAL_GENDER = MedicalTask("gender")
MEDICAL_RACE = MedicalTask("race")
