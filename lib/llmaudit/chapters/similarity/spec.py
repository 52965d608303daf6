"""The similarity chapter's declaration ("Bias Similarity Measurement"): its params section, and its steps across
audits (the models compared with must be audited first; the index compares every audited model's systems)."""

from __future__ import annotations

from typing import Any

from pydantic import field_validator, model_validator

from llmaudit.capabilities import Capability
from llmaudit.chapters.similarity.across import TEXT, compared_ready, similarity_charts
from llmaudit.chapters.similarity.bbq import INTERSECTIONAL
from llmaudit.paths import plain_name
from llmaudit.sections import Section, coefficients, once
from llmaudit.spec import ChapterSpec, IndexFigure, Result


class SimilarityParams(Section):
    """Sizes of the similarity chapter, paper 003's by default (a GPU's): BBQ questions per (category, context,
    polarity) cell (None: all of BBQ), StereoSet intrasentence items per bias type (None: all of them), UnQover units
    per dimension (one template, subject pair and attribute, asked in both subject orders and negated: four
    questions; None: every unit, 2.6 million over its four dimensions; the default, about paper 003's million
    samples: 904,000 questions, religion having 38,500 units), the steering
    coefficients whose steered models join the comparison, the relative depths (0 = first block, 1 = last) whose
    representations are compared with CKA (None: every block), the BBQ items per cell whose representations are kept
    for CKA (None, or no fewer than `per_cell`: every question run; a seeded share of them otherwise, since every
    block's last-token states of all of BBQ would not fit in memory), and other audited models (report folder
    names) to compare with."""

    per_cell: int | None = None
    stereoset: int | None = None
    unqover: int | None = 62_500
    lambdas: list[float] = [-1.0, 1.0]
    depths: list[float] | None = None
    cka_per_cell: int | None = 10
    compare_with: list[str] = []

    @field_validator("lambdas")
    @classmethod
    def _lambdas(cls, value: list[float]) -> list[float]:
        return coefficients(value)

    @field_validator("depths")
    @classmethod
    def _distinct(cls, value: list[float] | None) -> list[float] | None:
        return None if value is None else once(value)

    @field_validator("compare_with")
    @classmethod
    def _folders(cls, value: list[str]) -> list[str]:
        return [plain_name(name) for name in value]

    @model_validator(mode="after")
    def _sizes(self) -> SimilarityParams:
        counts_ok = all(n is None or n >= 1 for n in (self.per_cell, self.stereoset, self.unqover, self.cka_per_cell))
        depths_ok = self.depths is None or (bool(self.depths) and all(0 <= d <= 1 for d in self.depths))
        if not counts_ok or not depths_ok or 0 in self.lambdas:
            raise ValueError("need per_cell, stereoset, unqover and cka_per_cell >= 1 (or null: all), depths in "
                             "[0, 1] (or null: every block) and nonzero lambdas (lambda 0 is the model itself, always "
                             "included)")
        return self

    def represented(self) -> int | None:
        """BBQ items per cell whose representations are kept (None: every question the chapter runs)."""
        fewer = self.cka_per_cell is not None and (self.per_cell is None or self.cka_per_cell < self.per_cell)
        return self.cka_per_cell if fewer else None


CONTEXTS = {"amb": "ambiguous", "dis": "disambiguated"}
BBQ = "bbq{steered}"  # the model's BBQ scores ('bbq') or a steered copy's ('bbq.steered_+1')
# the scores recorded for each intersectional category apart, declared before the overall scores, whose {steered}
# would take these names too
INTERSECTIONAL_SCORES = (("acc", "share of questions", "questions answered correctly"),
                         ("unk", "share of questions", "questions answered Unknown"),
                         ("s", "score from -100 to 100", "BBQ bias score"))
RESULTS = (
    *(Result(f"bbq.{category}.{score}_{{context}}", unit, f"{meaning}, {category} questions only (an intersectional "
             "category, outside the overall scores' nine dimensions)")
      for category in INTERSECTIONAL for score, unit, meaning in INTERSECTIONAL_SCORES),
    ACCURACY := Result(BBQ + ".acc_{context}", "share of questions", "questions answered correctly"),
    Result(BBQ + ".unk_{context}", "share of questions", "questions answered Unknown"),
    BIAS := Result(BBQ + ".s_{context}", "score from -100 to 100",
                   "above 0: the model's committed answers follow the stereotype; 0: no preference"),
    MASS := Result("bbq.answer_mass", "probability", "what the model puts on the three option letters"),
    Result("stereoset{steered}.lms", "score from 0 to 100", "StereoSet language modelling score: a meaningful over "
           "the unrelated sentence"),
    SS := Result("stereoset{steered}.ss", "score from 0 to 100",
                 "forced to choose, the share of stereotyped over anti-stereotyped sentences; 50: no preference"),
    Result("stereoset{steered}.icat", "score from 0 to 100", "StereoSet's idealised CAT score: lms x min(ss, 100 - ss) "
           "/ 50"),
    Result("unqover{steered}.{dimension}.mu", "score from 0 to 1", "UnQover's bias intensity (Li et al. 2020): the "
           "mean over subjects of the largest |gamma| over attributes, position and negation errors removed"),
    Result("unqover{steered}.{dimension}.eta", "score from 0 to 1", "UnQover's count-based bias: the mean over "
           "subjects and attributes of |the mean sign of the bias-corrected comparisons|"),
    Result("unqover{steered}.{dimension}.pos_err", "probability", "UnQover's positional error: how much a subject's "
           "score changes when the two subjects swap places"),
    Result("unqover{steered}.{dimension}.attr_err", "probability", "UnQover's attributive error: how far negating the "
           "question fails to move the answer to the other subject"),
    Result("unqover.answer_mass", "probability", "what the model puts on the two option letters of UnQover"),
    Result("similarity.cosine.steered_{tag}", "cosine", "the BBQ answer distributions of the model and a steered copy"),
    Result("similarity.unk_flip.steered_{tag}", "share of questions", "questions whose Unknown answer the steering "
           "flips"),
    Result("similarity.cka.steered_{tag}", "linear CKA", "the deepest compared representations of the model and a "
           "steered copy"),
    Result("similarity.cka_{summary}.{other}", "linear CKA", "the CKA across depths with another model, summarised"),
    Result("similarity.unk_flip_from.{other}", "share of questions", "another model's (e.g. the base model's) "
           "committed BBQ answers that this model answers Unknown: paper 003's UNK flip from base to tuned"),
    Result("similarity.{score}_change.{other}", "score from -200 to 200", "this model's BBQ bias score minus another "
           "model's (e.g. its base model's) on the questions both answered"),
)
HEADLINES = (
    *(ACCURACY.headline(f"BBQ accuracy, {context} contexts",
                        ACCURACY.meaning + (" (Unknown is correct)" if key == "amb" else ""), steered="", context=key)
      for key, context in CONTEXTS.items()),
    *(BIAS.headline(f"BBQ bias score, {context} contexts", steered="", context=key)
      for key, context in CONTEXTS.items()),
    SS.headline("StereoSet stereotype score", steered=""),
    MASS.headline("BBQ answer mass"),
)

def _reused(section: dict[str, Any]) -> dict[str, Any]:
    """A profile's section for the audit of another model (--model, or a random-weight stand-in): the audits a profile
    compares with are its own model's partners, so another model's audit compares with none."""
    return {key: value for key, value in section.items() if key != "compare_with"}


CHAPTER = ChapterSpec(key="similarity", title="Similarity",
                      computing=("data", "models", "chapters.steering_vectors", "chapters.decision_tasks",
                                 "chapters.similarity"),
                      section="similarity", params=SimilarityParams, headlines=HEADLINES,
                      results=RESULTS, preflight=compared_ready, reused=_reused, standin=_reused,
                      index=IndexFigure(title="Bias similarity", text=TEXT, charts=similarity_charts),
                      needs=lambda params: (Capability.PROBABILITIES, Capability.STATES, Capability.EDITS))
