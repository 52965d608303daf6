"""The similarity chapter's tables from its systems (the model, its steered copies and other audited models): BBQ
bias scores, StereoSet scores, the steered copies' similarity to the model and the CKA across depths with other
models, each with the results the chapter records about it. A system is named by `system_name`: the model's name,
then for a steered copy its vector and 'λ=+1'."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd

from llmaudit.chapters.similarity.bbq import (
    ALL_UNKNOWN,
    INTERSECTIONAL,
    NO_QUESTIONS,
    accuracy_cases,
    bias_scores,
    in_percent,
)
from llmaudit.chapters.similarity.compare import cka_summary, shared_answers
from llmaudit.chapters.similarity.unqover import BBQ_CATEGORY
from llmaudit.chapters.similarity.unqover_bias import MEASURES
from llmaudit.findings import Findings, results_frame
from llmaudit.footnotes import explain

BBQ_COLUMNS = ("acc_amb", "acc_dis", "unk_amb", "unk_dis", "s_amb", "s_dis")
STEREOSET_COLUMNS = ("lms", "ss", "icat")


def steered_tag(system: str) -> str:
    """A steered copy's coefficient as the results name it, e.g. '+1' for 'model gender_lang λ=+1'."""
    return system.rsplit("=", 1)[1]


def own(systems: Sequence[str], model: str) -> list[str]:
    """The audited model and its steered copies among `systems` (not other models)."""
    return [name for name in systems if name == model or name.startswith(f"{model} ")]


def _prefix(benchmark: str, system: str, plain: str) -> str:
    """The results-name prefix of a system's scores: 'bbq' for the model, 'bbq.steered_+1' for a steered copy."""
    return benchmark if system == plain else f"{benchmark}.steered_{steered_tag(system)}"


def bbq(scores: Mapping[str, pd.DataFrame], answers: pd.DataFrame, plain: str, prompts: Sequence[str]) -> Findings:
    """Each system's overall BBQ scores (BBQ's nine dimensions) side by side in the papers' units (`in_percent`;
    `scores`: its `bias_scores`), recorded per system with its accuracy cases, then the model's scores on each
    intersectional category apart and its answer mass."""
    found, cases = [], []
    for name, table in scores.items():
        prefix = _prefix("bbq", name, plain)
        found += [{"name": f"{prefix}.{column}", "value": float(table.loc["overall", column]), "note": name}
                  for column in BBQ_COLUMNS]
        cases.append(accuracy_cases(answers[answers["system"] == name], prefix, prompts))
    found += [{"name": f"bbq.{category}.{column}", "value": float(scores[plain].loc[category, column]),
               "note": f"{plain}, {category} questions only"}
              for category in INTERSECTIONAL if category in scores[plain].index for column in BBQ_COLUMNS]
    found.append({"name": "bbq.answer_mass", "value": float(answers.loc[answers["system"] == plain, "mass"].mean()),
                  "note": "mean probability on the three option letters"})
    table = pd.concat({name: in_percent(table).loc["overall"] for name, table in scores.items()}, axis=1)
    return Findings(table, results_frame(found), cases=cases)


def per_category(scores: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """Each system's bias scores per category, long (category, score, value, system): the figure's data."""
    return pd.concat([table.drop(index="overall")[["s_amb", "s_dis"]].stack().rename("value").reset_index()
                      .rename(columns={"level_1": "score"}).assign(system=name) for name, table in scores.items()])


def per_bias_type(scores: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """Each system's StereoSet scores per bias type, long (one row per system and bias type): the figure's data."""
    return pd.concat([table.drop(index="overall").reset_index().assign(system=name) for name, table in scores.items()])


def stereoset(scores: Mapping[str, pd.DataFrame], plain: str) -> Findings:
    """Each system's overall StereoSet scores side by side, recorded for the model and its steered copies."""
    found = [{"name": f"{_prefix('stereoset', name, plain)}.{column}", "value": float(table.loc["overall", column]),
              "note": name}
             for name, table in scores.items() if name in own(list(scores), plain) for column in STEREOSET_COLUMNS]
    return Findings(pd.concat({name: table.loc["overall"] for name, table in scores.items()}, axis=1),
                    results_frame(found))


def unqover(scores: Mapping[str, pd.DataFrame], answers: pd.DataFrame, plain: str) -> Findings:
    """Each system's UnQover measures per dimension (`scores`: its `model_bias`), long (dimension, measure) by
    system, recorded for the model and its steered copies, with the model's mass on the two letters (`answers`: the
    model's own run)."""
    found = [{"name": f"{_prefix('unqover', name, plain)}.{dimension}.{measure}", "value": float(value),
              "note": f"{name}, {int(table.loc[dimension, 'units'])} units"}
             for name, table in scores.items() if name in own(list(scores), plain) for dimension in table.index
             for measure, value in table.loc[dimension, list(MEASURES)].items()]
    found.append({"name": "unqover.answer_mass", "value": float(answers.loc[answers["system"] == plain, "mass"].mean()),
                  "note": "mean probability on the two option letters"})
    return Findings(pd.concat({name: table[list(MEASURES)].stack() for name, table in scores.items()}, axis=1),
                    results_frame(found))


def abstention_masks_bias(bbq_scores: Mapping[str, pd.DataFrame],
                          unqover_scores: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """Paper 003's "abstention masks bias" per system and dimension (the systems both benchmarks scored, e.g. a
    model and its base model): BBQ's Unknown share and bias scores in the dimension's BBQ category (in percent)
    beside UnQover's mu and eta (x100), where no Unknown is offered."""
    table = pd.concat({name: _beside(bbq_scores[name], unqover_scores[name]) for name in bbq_scores
                       if name in unqover_scores}, names=["system"])
    return explain(table, {"bbq_unk_amb": NO_QUESTIONS, "bbq_s_amb": ALL_UNKNOWN, "bbq_s_dis": ALL_UNKNOWN})


def _beside(bbq_scores: pd.DataFrame, unqover_scores: pd.DataFrame) -> pd.DataFrame:
    """One system's rows of `abstention_masks_bias`."""
    bbq = in_percent(bbq_scores)
    rows = {dimension: {"bbq_category": category, "bbq_unk_amb": bbq.loc[category, "unk_amb"],
                        "bbq_s_amb": bbq.loc[category, "s_amb"], "bbq_s_dis": bbq.loc[category, "s_dis"],
                        "unqover_mu": 100.0 * unqover_scores.loc[dimension, "mu"],
                        "unqover_eta": 100.0 * unqover_scores.loc[dimension, "eta"]}
            for dimension, category in BBQ_CATEGORY.items()
            if category in bbq.index and dimension in unqover_scores.index}
    return pd.DataFrame.from_dict(rows, orient="index").rename_axis("dimension")


def steered_similarity(cosine: pd.DataFrame, flips: pd.DataFrame, cka: pd.DataFrame, plain: str,
                       depth: float) -> pd.DataFrame:
    """Results of each steered copy against the model: the cosine of their answer histograms, the UNK flip and the
    linear CKA at relative `depth`."""
    found = []
    for name in own(list(cosine.columns), plain):
        if name == plain:
            continue
        tag = steered_tag(name)
        found += [{"name": f"similarity.cosine.steered_{tag}", "value": float(cosine.loc[plain, name]), "note": name},
                  {"name": f"similarity.unk_flip.steered_{tag}", "value": float(flips.loc[plain, name]),
                   "note": f"share of {plain}'s committed answers that {name} answers Unknown"},
                  {"name": f"similarity.cka.steered_{tag}", "value": float(cka.loc[plain, name]),
                   "note": f"relative depth {depth:g}"}]
    return results_frame(found)


def cka_with_others(across: Mapping[str, pd.DataFrame], plain: str) -> Findings:
    """Each system's CKA across depths with the model, summarised (diagonal and full-matrix means); recorded for the
    other models."""
    summary = pd.DataFrame({name: cka_summary(table) for name, table in across.items()}).T
    others = [name for name in across if name not in own(list(across), plain)]
    found = [{"name": f"similarity.cka_{kind}.{other}", "value": value,
              "note": f"{kind} summary of the CKA across depths with {plain}"}
             for other in others for kind, value in summary.loc[other].items()]
    return Findings(summary, results_frame(found))


def against_others(answers: pd.DataFrame, flips: pd.DataFrame, plain: str) -> Findings:
    """Paper 003's base-to-tuned reading of each other model (e.g. this model's base model) against this one, on the
    BBQ questions both answered: their overall bias scores, the change from the other model to this one, and the UNK
    flip from the other to this one (the share of its committed answers this model answers Unknown); recorded per
    other model. `answers`: every system's answers; `flips`: their `unk_flip_matrix`."""
    systems = list(dict.fromkeys(answers["system"]))
    mine = answers[answers["system"] == plain]
    rows, found = {}, []
    for other in [name for name in systems if name not in own(systems, plain)]:
        pair = shared_answers(mine, answers[answers["system"] == other])
        this, that = (bias_scores(part).loc["overall"] for part in pair)
        rows[other] = {"s_amb": that["s_amb"], "s_dis": that["s_dis"], "s_amb_change": this["s_amb"] - that["s_amb"],
                       "s_dis_change": this["s_dis"] - that["s_dis"], "unk_flip_from": flips.loc[other, plain],
                       "questions": len(pair[0])}
        found += [{"name": f"similarity.{score}_change.{other}", "value": rows[other][f"{score}_change"],
                   "note": f"{plain} minus {other} on their {len(pair[0])} shared questions"}
                  for score in ("s_amb", "s_dis")]
        found.append({"name": f"similarity.unk_flip_from.{other}", "value": rows[other]["unk_flip_from"],
                      "note": f"share of {other}'s committed answers that {plain} answers Unknown"})
    table = pd.DataFrame.from_dict(rows, orient="index", columns=["s_amb", "s_dis", "s_amb_change", "s_dis_change",
                                                                  "unk_flip_from", "questions"])
    return Findings(table.rename_axis("compared with"), results_frame(found))
