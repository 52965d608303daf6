"""The framing chapter's declaration ("Measuring Bias or Measuring the Task"): its params section."""

from __future__ import annotations

from typing import Literal

from pydantic import field_validator, model_validator

from llmaudit.capabilities import Capability
from llmaudit.sections import Section, coefficients
from llmaudit.spec import ChapterSpec, Result


class FramingParams(Section):
    """Sizes and design of the framing chapter: attributes per stereotype tag (None: all), sampled answers (and option
    orders) per cell, their length, the steering coefficients compared with prompting, and the design every statistic
    is computed for: the prompt `form` and the sampler's `decoding` (the paper's by default, `DESIGNS`)."""

    per_tag: int | None = None
    samples: int = 10
    max_new_tokens: int = 50  # the paper's "maximum token length of 50" (Measuring Bias or Measuring the Task, §4.2)
    lambdas: list[float] = [-1.0, 0.0, 1.0]
    form: Literal["plain", "chat"] = "plain"
    decoding: Literal["release", "full_vocabulary"] = "release"

    @field_validator("lambdas")
    @classmethod
    def _lambdas(cls, value: list[float]) -> list[float]:
        if len(coefficients(value)) < 2:
            raise ValueError("give at least 2 distinct steering coefficients")
        return value

    @model_validator(mode="after")
    def _sizes(self) -> FramingParams:
        if (self.per_tag is not None and self.per_tag < 1) or self.samples < 1 or self.max_new_tokens < 1:
            raise ValueError("need per_tag >= 1 (or omitted), samples >= 1 and max_new_tokens >= 1")
        return self


FORMS = ("plain", "chat")  # the prompt as plain text to continue, and read through the chat template
# Each design choice: the paper's option first (Measuring Bias or Measuring the Task: §2 and §4.1 use the "pure"
# language-modelling setup on the instruction-tuned checkpoints and each release's default decoding), then ours.
DESIGNS = {
    "form": {"plain": "the paper's pure language-modelling form (plain text to continue, §2, §4.1)",
             "chat": "ours: one chat turn in the model's chat template"},
    "decoding": {"release": "the paper's: the model's release decoding (its generation config, §4.1)",
                 "full_vocabulary": "ours: temperature 1 over the whole vocabulary"},
}


def design_note(params: FramingParams) -> str:
    """The results' note of the design a run used: its form and decoding, each said to be the paper's or ours."""
    return f"{params.form} form, {DESIGNS['form'][params.form]}; {params.decoding} decoding, " \
           f"{DESIGNS['decoding'][params.decoding]}"


RESULTS = (
    Result("{form}.{task}.gen_effect", "probability", "the task's GenEffect: mean APD over attributes (token "
           "probability)"),
    Result("{form}.{task}.instr_effect", "probability", "the task's InstrEffect: mean APD over attributes (token "
           "probability)"),
    SHIFT := Result("{form}.pronoun_shift", "probability",
                    "how often changing the prompt's framing changes the pronoun the model prefers"),
    Result("{form}.pronoun_model.{pronoun}_minus_he", "relative shift", "how much more the evaluation-like framing "
           "raises the pronoun than 'he' (mixed model, random intercept per attribute)"),
    Result("{form}.excluded_cells", "cells", "(task, condition) cells left out for too few pronouns"),
    EXCLUDED := Result("{form}.excluded_share", "share of cells",
                       "(task, condition) cells whose sampled answers name too few pronouns to compare with"),
    Result("{form}.valid_answers", "answers", "sampled answers with a pronoun in the kept cells"),
    Result("token_vs_choice.{pronoun}", "Pearson r", "the token probability of a pronoun against the share of "
           "sampled answers choosing it, over kept cells"),
    Result("{form}.sensitivity.{metric}", "probability", "framing sensitivity (mean of GenEffect and InstrEffect) "
           "under one metric"),
    Result("{form}.they_names_gender", "share of answers", "answers counted as 'they' that name a gender anyway"),
    Result("decoding.{setting}", "setting", "the sampler's temperature, top-k (empty: the whole vocabulary) and "
           "top-p, the model's release decoding (the paper's) or ours"),
    SPAN := Result("steering.{task}.she_span", "probability",
                   "P(she) at lambda = +1 minus at -1: how far the gender vector moves the pronoun"),
)
HEADLINES = (
    *(SHIFT.headline(f"{form} prompts: pronoun shift", form=form) for form in FORMS),
    *(EXCLUDED.headline(f"{form} prompts: cells left out", form=form) for form in FORMS),
    *(SPAN.headline(f"{task} prompts: P(she) under steering", task=task) for task in ("association", "completion")),
)

CHAPTER = ChapterSpec(key="framing", title="Framing",
                      computing=("data", "models", "chapters.steering_vectors", "chapters.decision_tasks",
                                 "chapters.framing"),
                      section="framing", params=FramingParams, headlines=HEADLINES,
                      results=RESULTS,
                      needs=lambda params: (Capability.PROBABILITIES, Capability.STATES, Capability.EDITS,
                                            Capability.SAMPLING))
