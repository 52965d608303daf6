"""The similarity chapter across audits: before an audit runs, the models it compares with must have been audited;
after it, the cross-model index compares every audited model's systems (the model and its steered versions)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import altair as alt
import pandas as pd

from llmaudit.chapters.similarity.compare import (
    Grams,
    cka_across_depths,
    cka_matrix,
    cka_summary,
    similarity_matrix,
    unk_flip_matrix,
)
from llmaudit.chapters.similarity.plots import matrix, stereotype_scores
from llmaudit.chapters.similarity.saved import FOLDER, load_stereoset_answers, load_systems
from llmaudit.chapters.similarity.stereoset import stereoset_scores
from llmaudit.errors import AuditError, ConfigError

TEXT = ("Each audited model and its gender-steered versions answer the same BBQ questions (similarity chapter): "
        "how alike their answers are (histogram cosine), how often one abstains where the other follows the "
        "stereotype (UNK flip), how alike their representations are (linear CKA at one relative depth, and "
        "averaged over matching relative depths), and, forced to choose on StereoSet, how often each picks the "
        "stereotype.")


def compared_ready(params: Any, reports: Path) -> None:
    """Stop before any chapter runs when `similarity.compare_with` names the audited model itself (it would be
    compared with its own answers) or a model with no similarity results yet, rather than after the chapters before
    it."""
    if params.name in params.similarity.compare_with:
        raise ConfigError(f"similarity.compare_with names {params.name}, the model this params file audits: list other "
                          "audited models")
    missing = [name for name in params.similarity.compare_with
               if not (reports / name / FOLDER / "answers.csv").is_file()]
    if missing:
        raise ConfigError(f"similarity.compare_with names {', '.join(missing)}, with no similarity results in "
                          f"{reports}: audit {' and '.join(missing)} first (`llmaudit audit NAME`; the second offline "
                          "model's weights come with `make second-model`)")


def _systems(reports: Path, model: str) -> set[str]:
    """The system names of one model's saved similarity results; a representation key that is not 'system|depth'
    with a finite depth (which the figure splits) is a one-line AuditError."""
    answers, reps = load_systems(reports, [model])
    for key in reps:
        system, _, depth = key.rpartition("|")
        try:
            readable = bool(system) and math.isfinite(float(depth))
        except ValueError:
            readable = False
        if not readable:
            raise AuditError(f"similarity results of {model} hold a representation {key!r} not named 'system|depth': "
                             f"rerun the similarity chapter of {model}")
    return set(answers["system"])


def _compared(reports: Path, models: list[str], own: str | None) -> tuple[list[str], list[str]]:
    """The models whose similarity results the figure compares, and why others were left out: damaged files, or
    systems named as an earlier folder's (a copied folder); damaged files of the `own` folder stop with their
    error."""
    ran: list[str] = []
    skipped: list[str] = []
    seen: set[str] = set()
    for model in (m for m in models if (Path(reports) / m / FOLDER / "answers.csv").exists()):
        try:
            names = _systems(reports, model)
        except AuditError as err:
            if model == own:
                raise
            skipped.append(f"{model}: {err}")
            continue
        if names & seen:
            repeated = ", ".join(sorted(names & seen))
            skipped.append(f"{model}: its similarity systems are named as another folder's ({repeated}): a copy of a "
                           "report folder? Remove one of them")
            continue
        seen |= names
        ran.append(model)
    return ran, skipped


def similarity_charts(reports: Path, models: list[str], own: str | None = None) -> tuple[list[Any], list[str]]:
    """Charts comparing every system (model, or model steered) of the audited models whose similarity chapter has
    run: answer-histogram cosine, UNK flip, linear CKA at the deepest depth they share and averaged over matching
    depths (of the systems with saved representations: none of a model behind an endpoint), and StereoSet's
    stereotype score (none when none has run); and why a model's systems were left out (`_compared`)."""
    ran, skipped = _compared(reports, models, own)
    if not ran:
        return [], skipped
    answers, reps = load_systems(reports, ran)
    systems = list(dict.fromkeys(answers["system"]))
    cosine = similarity_matrix({name: part for name, part in answers.groupby("system", sort=False)})
    represented = [name for name in systems if any(key.rpartition("|")[0] == name for key in reps)]  # endpoints: none
    depths = {float(key.rsplit("|", 1)[1]) for key in reps}
    shared = [d for d in depths if all(f"{name}|{d:g}" in reps for name in represented)]
    grams = Grams(reps)  # every pair of systems at every pair of depths: each Gram matrix once
    charts: list[alt.TopLevelMixin] = [
        matrix(cosine.loc[systems, systems], "cosine").properties(title="Cosine similarity of answer histograms"),
        matrix(unk_flip_matrix(answers).loc[systems, systems], "UNK flip").properties(
            title="UNK flip: share of the row's committed answers the column answers Unknown"),
    ]
    if shared:
        cka = cka_matrix(reps, max(shared), grams).loc[represented, represented]
        charts.append(matrix(cka, "CKA").properties(title=f"Linear CKA, relative depth {max(shared):g}"))
    if represented:
        diagonal = pd.DataFrame({b: {a: cka_summary(cka_across_depths(reps, a, b, grams))["diagonal"]
                                     for a in represented} for b in represented}).loc[represented, represented]
        charts.append(matrix(diagonal, "CKA").properties(title="Linear CKA across depths: mean over matching depths"))
    forced = load_stereoset_answers(reports, ran)
    if len(forced):
        scores = pd.concat([stereoset_scores(part).loc[["overall"]].assign(system=name)
                            for name, part in forced.groupby("system", sort=False)]).rename_axis("bias_type")
        charts.append(stereotype_scores(scores.reset_index()).properties(
            title="StereoSet forced choice: stereotype score (50: no preference)"))
    return charts, skipped
