"""The similarity chapter's declaration ("Bias Similarity Measurement"): its params section, and its steps across
audits (the models compared with must be audited first; the index compares every audited model's systems)."""

from __future__ import annotations

from typing import Any

from pydantic import field_validator, model_validator

from llmaudit.chapters.similarity.across import TEXT, compared_ready, similarity_charts
from llmaudit.paths import plain_name
from llmaudit.sections import Section, coefficients, once
from llmaudit.spec import ChapterSpec, IndexFigure, Result


class SimilarityParams(Section):
    """Sizes of the similarity chapter: BBQ questions per (category, context, polarity) cell, StereoSet items per
    bias type, the steering coefficients whose steered models join the comparison, the relative depths (0 = first
    block, 1 = last) whose representations are compared with CKA, and other audited models (report folder names) to
    compare with."""

    per_cell: int = 4
    stereoset: int = 25
    lambdas: list[float] = [-1.0, 1.0]
    depths: list[float] = [0.25, 0.5, 0.75, 1.0]
    compare_with: list[str] = []

    @field_validator("lambdas")
    @classmethod
    def _lambdas(cls, value: list[float]) -> list[float]:
        return coefficients(value)

    @field_validator("depths")
    @classmethod
    def _distinct(cls, value: list[float]) -> list[float]:
        return once(value)

    @field_validator("compare_with")
    @classmethod
    def _folders(cls, value: list[str]) -> list[str]:
        return [plain_name(name) for name in value]

    @model_validator(mode="after")
    def _sizes(self) -> SimilarityParams:
        depths_ok = bool(self.depths) and all(0 <= d <= 1 for d in self.depths)
        if self.per_cell < 1 or self.stereoset < 1 or not depths_ok or 0 in self.lambdas:
            raise ValueError("need per_cell >= 1, stereoset >= 1, depths in [0, 1] and nonzero lambdas (lambda 0 is "
                             "the model itself, always included)")
        return self


CONTEXTS = {"amb": "ambiguous", "dis": "disambiguated"}
BBQ = "bbq{steered}"  # the model's BBQ scores ('bbq') or a steered copy's ('bbq.steered_+1')
RESULTS = (
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
    Result("similarity.cosine.steered_{tag}", "cosine", "the BBQ answer distributions of the model and a steered copy"),
    Result("similarity.unk_flip.steered_{tag}", "share of questions", "questions whose Unknown answer the steering "
           "flips"),
    Result("similarity.cka.steered_{tag}", "linear CKA", "the deepest compared representations of the model and a "
           "steered copy"),
    Result("similarity.cka_{summary}.{other}", "linear CKA", "the CKA across depths with another model, summarised"),
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
    """A profile's section for the audit of another model: the audits a profile compares with are its own model's
    partners, so another model's audit compares with none."""
    return {key: value for key, value in section.items() if key != "compare_with"}


CHAPTER = ChapterSpec(key="similarity", title="Similarity",
                      computing=("data", "models", "chapters.steering_vectors", "chapters.decision_tasks",
                                 "chapters.similarity"),
                      section="similarity", params=SimilarityParams, headlines=HEADLINES,
                      results=RESULTS, preflight=compared_ready, reused=_reused,
                      index=IndexFigure(title="Bias similarity", text=TEXT, charts=similarity_charts))
