"""The steering-vectors chapter's tables of its extractions: each vector's data, its choice (block, corr, sep,
scale), the causal check on held-out rows, its gates and the cosines between vectors, with the results the chapter
records about them."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pandas as pd

from llmaudit.chapters.steering_vectors.extract import Extraction
from llmaudit.chapters.steering_vectors.recipes import CONCEPT_VECTORS, RECIPES, held_for_tasks
from llmaudit.chapters.steering_vectors.spec import CORR, SCORE_SPAN, SteeringParams
from llmaudit.findings import Findings, results_frame
from llmaudit.spec import result

Extractions = Mapping[str, Extraction]


def data_table(extractions: Extractions, settings: SteeringParams, mirror: Path | None) -> pd.DataFrame:
    """Per vector: its concept and data set, its training and validation rows, the validation rows kept for the
    decision tasks, the score and split the params chose, the training rows per side and the mean label mass."""
    def row(name: str, ex: Extraction) -> dict[str, object]:
        quantile = settings.quantile.get(name)
        return {"concept": ex.vector.concept, "data": ex.vector.meta["dataset"], "train": len(ex.train),
                "val": len(ex.val), "val for tasks": held_for_tasks(RECIPES[name], mirror),
                "score": "normalised" if settings.normalised else "raw",
                "split": f"quantile {quantile}" if quantile else f"tau {settings.tau}",
                **ex.vector.meta["split_counts"], "label mass": ex.vector.meta["label_mass"]}
    return pd.DataFrame.from_dict({name: row(name, ex) for name, ex in extractions.items()}, orient="index")


def choice(extractions: Extractions) -> Findings:
    """Per vector: its block, validation corr and sep there, and scale k; the results add its training rows per side
    and its label mass ('{vector}.block', ...)."""
    table = pd.DataFrame.from_dict(
        {name: {"block": ex.vector.layer, CORR: ex.vector.meta["corr"], "sep": ex.vector.meta["sep"],
                "k": ex.vector.k} for name, ex in extractions.items()}, orient="index")
    found = []
    for name, ex in extractions.items():
        recorded = {**table.loc[name].to_dict(), **ex.vector.meta["split_counts"],
                    "label_mass": ex.vector.meta["label_mass"]}
        found += [{"name": result(name, key), "value": int(value) if key == "block" else value}
                  for key, value in recorded.items()]
    return Findings(table, results_frame(found))


def causal_check(effects: pd.DataFrame, held_out: Mapping[str, int], normalised: bool) -> Findings:
    """The held-out rows' mean raw score, normalised score and target mass per vector, unsteered and at each lambda
    (effects: vector, lam (NaN: unsteered), raw, normalised, mass; `held_out`: rows per vector); the results per
    vector: the span of its chosen score and of the raw score from lambda = -1 to +1, and its unsteered mass."""
    labelled = effects.assign(lam=effects["lam"].astype(object).where(effects["lam"].notna(), "unsteered"))
    effect = labelled.groupby(["vector", "lam"], sort=False)[["raw", "normalised", "mass"]].mean()
    score = "normalised" if normalised else "raw"
    found = []
    for name, rows in held_out.items():
        at = effect.loc[name]
        found += [{"name": result(name, SCORE_SPAN), "value": at.loc[1.0, score] - at.loc[-1.0, score],
                   "note": f"mean {score} score at lambda=+1 minus at -1, {rows} held-out rows"},
                  {"name": result(name, "steered_raw_span"), "value": at.loc[1.0, "raw"] - at.loc[-1.0, "raw"],
                   "note": "mean P(T+) - P(T-) at lambda=+1 minus at -1"},
                  {"name": result(name, "target_mass_unsteered"), "value": at.loc["unsteered", "mass"],
                   "note": "mean P(T+) + P(T-)"}]
    table = effect.unstack("vector").swaplevel(axis=1).sort_index(axis=1, level=0, sort_remaining=False)
    return Findings(table, results_frame(found))


def gate_table(extractions: Extractions, check: Findings, corr_min: float, span_min: float) -> pd.DataFrame:
    """Per vector, its two instrument gates with the thresholds in the column names (its span from `check`, the
    causal check), and whether both pass."""
    rows = {}
    for name, ex in extractions.items():
        corr, span = ex.vector.meta["corr"], check.results.at[result(name, SCORE_SPAN), "value"]
        rows[name] = {"corr": corr, f"corr >= {corr_min:g}": corr >= corr_min, "span": span,
                      f"span >= {span_min:g}": span >= span_min}
    checks = pd.DataFrame(rows).T
    checks["usable"] = checks.iloc[:, 1] & checks.iloc[:, 3]
    return checks


def cosines(extractions: Extractions) -> Findings:
    """The cosine between every two vectors; the results are each concept's two vectors' ('cos.{main}.{second}')."""
    vectors = {name: ex.vector for name, ex in extractions.items()}
    table = pd.DataFrame({a: {b: va.cosine(vb) for b, vb in vectors.items()} for a, va in vectors.items()})
    found = [{"name": f"cos.{main}.{second}", "value": table.loc[main, second]}
             for main, second in CONCEPT_VECTORS.values()]
    return Findings(table, results_frame(found))
