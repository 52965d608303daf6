"""The steering-vectors chapter's declaration: its params section and the names of the results the verdict page's
gates read (a vector must track and move its concept)."""

from __future__ import annotations

from typing import Any

from pydantic import field_validator

from llmaudit.capabilities import Capability
from llmaudit.chapters.steering_vectors.recipes import CONCEPT_VECTORS, RECIPES
from llmaudit.sections import Section, at_least, coefficients, known, within
from llmaudit.spec import ChapterSpec, Gate, Result, result

CORR = "corr"  # Pearson r of the projection on the vector with the concept score (main paper §3.3)
SCORE_SPAN = "steered_score_span"  # the concept score at lambda = +1 minus at -1, on held-out rows
DATASETS = sorted({recipe.dataset for recipe in RECIPES.values()})


class SteeringParams(Section):
    """Sizes and thresholds for extracting the steering vectors (main paper §3.3), and the held-out rows and
    coefficients of the causal check (rows of the validation split that neither chose the block nor the scale)."""

    tau: float = 0.05
    normalised: bool = False
    quantile: dict[str, float] = {}
    skip_last_layers: float = 0.05
    train_rows: dict[str, int | None] = {}
    val_rows: dict[str, int | None] = {}
    demo_prompt: str = "Write one sentence about a nurse who is starting a new job."
    demo_tokens: int = 24
    check_rows: int = 64
    check_lambdas: list[float] = [-1.0, -0.5, 0.0, 0.5, 1.0]

    @field_validator("tau", "skip_last_layers")
    @classmethod
    def _fraction(cls, value: float) -> float:
        return within(value, 0, 1)

    @field_validator("quantile")
    @classmethod
    def _quantiles(cls, value: dict[str, float]) -> dict[str, float]:
        for name, q in value.items():
            known(name, sorted(RECIPES))
            if not 0 < q < 0.5:
                raise ValueError(f"{name}: must be in (0, 0.5) (got {q})")
        return value

    @field_validator("train_rows", "val_rows")
    @classmethod
    def _datasets(cls, value: dict[str, int | None]) -> dict[str, int | None]:
        for name in value:
            known(name, DATASETS)
        return value

    @field_validator("check_rows")
    @classmethod
    def _rows(cls, value: int) -> int:
        return at_least(value, 2, "held-out rows")

    @field_validator("check_lambdas")
    @classmethod
    def _lambdas(cls, value: list[float]) -> list[float]:
        coefficients(value)
        if not {-1.0, 1.0} <= set(value):
            raise ValueError("include -1 and 1 (the span is measured between them)")
        return value


SPLITS = ("positive", "negative", "neutral")  # the extraction rows by the sign of their concept score
RESULTS = (
    Result("{vector}.block", "block index", "the block whose residual stream the vector is taken from"),
    CORR_RESULT := Result(result("{vector}", CORR), "Pearson r", "how closely the projection on the vector tracks "
                          "the concept score of validation rows (gate: at least 0.2)"),
    Result("{vector}.sep", "penalty", "the sign penalty at the chosen block: validation rows projected on the wrong "
           "side"),
    Result("{vector}.k", "projection per score unit", "the scale: steering by lambda k moves the concept score by "
           "about lambda"),
    *(Result(f"{{vector}}.{split}", "rows", f"training rows with a {split} concept score") for split in SPLITS),
    Result("{vector}.label_mass", "probability", "what the model puts on the concept's target words"),
    SPAN_RESULT := Result(result("{vector}", SCORE_SPAN), "normalised score", "how far steering from lambda = -1 to "
                          "+1 moves the concept score of held-out rows (gate: at least 0.5)"),
    Result("{vector}.steered_raw_span", "probability difference", "the same span of the raw score P(T+) - P(T-)"),
    Result("{vector}.target_mass_unsteered", "probability", "held-out rows' mass on the target words, unsteered"),
    Result("cos.{main}.{alternative}", "cosine", "the two vectors of one concept: near 1, the data hardly matter"),
)

HEADLINES = tuple(
    headline
    for concept, vectors in CONCEPT_VECTORS.items()
    for vector in vectors
    for headline in (
        CORR_RESULT.headline(f"{vector}: projection vs {concept} score", vector=vector),
        SPAN_RESULT.headline(f"{vector}: steered {concept} score span", vector=vector),
    )
)

CONCEPT = {vector: concept for concept, vectors in CONCEPT_VECTORS.items() for vector in vectors}
GATES = (
    Gate(instrument="vector", name=CORR, label="corr", column="value", threshold="vector_corr", default=0.2, top=1,
         strict=False,
         failing="its projection hardly tracks the {concept} score: not a {concept} direction on this model",
         concepts=CONCEPT),
    Gate(instrument="vector", name=SCORE_SPAN, label="steered score span", column="value", threshold="vector_span",
         default=0.5, top=2, strict=False,
         failing="steering along it hardly moves the {concept} score: not a {concept} direction on this model",
         concepts=CONCEPT),
)

def _standin(section: dict[str, Any]) -> dict[str, Any]:
    """The section as a random-weight stand-in's audit reads it: a random model reads every concept weakly and
    one-sidedly, so the scores are normalised (the preference among the target words) and split at their 30% / 70%
    quantiles, as the default model's are."""
    return {**section, "normalised": True, "quantile": dict.fromkeys(RECIPES, 0.3)}


CHAPTER = ChapterSpec(key="steering_vectors", title="Steering vectors",
                      computing=("data", "models", "chapters.steering_vectors"), section="steering",
                      params=SteeringParams, headlines=HEADLINES, gates=GATES, results=RESULTS, standin=_standin,
                      concepts=CONCEPT,
                      needs=lambda params: (Capability.PROBABILITIES, Capability.STATES, Capability.EDITS))
