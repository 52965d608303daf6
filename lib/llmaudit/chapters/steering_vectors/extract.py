"""The whole Chapter 1 pipeline for one vector: score texts and read every block's activations in one pass,
build per-layer WMD candidates on training data, pick and scale one on validation data."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd
import torch

from llmaudit.chapters.steering_vectors.concept import ConceptTokens, concept_tokens, split_counts, thresholds
from llmaudit.chapters.steering_vectors.recipes import Recipe, rows, validation_size
from llmaudit.chapters.steering_vectors.selection import (
    choose_layer,
    eligible_layers,
    layer_metrics,
    projections,
    scale,
)
from llmaudit.chapters.steering_vectors.spec import SteeringParams
from llmaudit.chapters.steering_vectors.wmd import wmd
from llmaudit.data import read_json
from llmaudit.models.ask import ask
from llmaudit.models.passes.required import required
from llmaudit.models.request import Request
from llmaudit.models.vector import SteeringVector

if TYPE_CHECKING:
    from llmaudit.models import AuditModel


@dataclass
class Extraction:
    """A chosen vector plus the evidence for it: per-layer metrics and the scored training/validation rows."""

    vector: SteeringVector
    layers: pd.DataFrame
    train: pd.DataFrame
    val: pd.DataFrame


def tokens_for(model: AuditModel, concept: str, mirror: Path | None = None) -> ConceptTokens:
    """T+ / T- ids for `concept` from target_words.json, in the single-token forms this tokenizer has."""
    words = read_json("llm-steering-audit/target_words.json", mirror)[concept]
    return concept_tokens(concept, words, model.single_token_ids)


def forward_concept(
    model: AuditModel,
    frame: pd.DataFrame,
    tokens: ConceptTokens,
    desc: str | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Target-token probabilities (n, labels) and all blocks' last-token activations (n, layers, width) of
    `frame`'s prompts, from one forward pass per batch; cached by prompt text and model."""
    prompts = [model.chat(inst, prefix) for inst, prefix in zip(frame["instruction"], frame["prefix"])]
    layers = list(range(model.n_layers))
    out = ask(model, Request(texts=prompts, labels=tokens.ids, layers=layers, desc=desc))
    return out.probs[0], required(out.acts, "block outputs")[0]


def template_centres(scores: torch.Tensor, template: pd.Series) -> dict[int, float]:
    """Median score per instruction template: what the wording of the question alone contributes."""
    frame = pd.DataFrame({"s": scores.numpy(), "t": template.to_numpy()})
    return {int(t): float(m) for t, m in frame.groupby("t")["s"].median().items()}


def extract(
    model: AuditModel,
    recipe: Recipe,
    params: SteeringParams,
    seed: int,
    mirror: Path | None = None,
) -> Extraction:
    """Build, validate, choose and scale the steering vector of `recipe` for `model`."""
    tokens = tokens_for(model, recipe.concept, mirror)
    tables, acts = {}, {}
    sizes = {"train": params.train_rows.get(recipe.dataset),
             "val": validation_size(recipe, params.val_rows.get(recipe.dataset), params.check_rows, mirror)}
    for split, n in sizes.items():
        frame = rows(recipe, split, n, seed, mirror)
        probs, a = forward_concept(model, frame, tokens, desc=f"{recipe.name} {split}")
        s = tokens.score(probs, params.normalised)
        tables[split], acts[split] = frame.assign(score=s.numpy(), label_mass=probs.sum(-1).numpy()), a
    quantile = params.quantile.get(recipe.name)
    centres = template_centres(torch.tensor(tables["train"]["score"].to_numpy()), tables["train"]["template"])
    if quantile is None:
        centres = dict.fromkeys(centres, 0.0)
    train_s, val_s = (
        torch.tensor((tables[split]["score"] - tables[split]["template"].map(centres)).to_numpy())
        for split in ("train", "val")
    )
    low, high = thresholds(train_s, params.tau, quantile)
    directions, means = wmd(acts["train"], train_s, low, high)
    p = projections(acts["val"], directions, means)
    corr, sep = layer_metrics(p, val_s)
    layer = choose_layer(corr, sep, params.skip_last_layers)
    k = scale(p[:, layer], val_s)
    vector = SteeringVector(
        name=recipe.name,
        concept=recipe.concept,
        layer=layer,
        direction=directions[layer],
        mean=means[layer],
        k=k,
        meta={
            "model": model.name,
            "weights": model.identity["weights"],
            "dataset": recipe.dataset,
            "instructions": recipe.instructions,
            "normalised_scores": params.normalised,
            "template_centres": centres,
            "band": [low, high],
            "split_counts": split_counts(train_s, low, high),
            "label_mass": float(tables["train"]["label_mass"].mean()),
            "corr": float(corr[layer]),
            "sep": float(sep[layer]),
            "train_ids": tables["train"]["_id"].astype(int).tolist(),
            "val_ids": tables["val"]["_id"].astype(int).tolist(),
        },
    )
    n_eligible = eligible_layers(model.n_layers, params.skip_last_layers)
    per_layer = pd.DataFrame(
        {
            "layer": range(model.n_layers),
            "corr": corr.numpy(),
            "sep": sep.numpy(),
            "objective": (corr - sep).numpy(),
            "eligible": [i < n_eligible for i in range(model.n_layers)],
        }
    )
    val = tables["val"].assign(score=val_s.numpy(), projection=p[:, layer].numpy())
    return Extraction(vector, per_layer, tables["train"].assign(score=train_s.numpy()), val)

