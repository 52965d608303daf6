"""Run BBQ, StereoSet and UnQover on one model as several "systems": the model as it is (one unsteered pass, the
black-box part, which an endpoint answers too) and the model steered along a vector at each lambda (one sweep, the
white-box part, beside the unsteered answers, not asking them again): per question the option probabilities and
the argmax answer, and BBQ's last-token representations at chosen relative depths for CKA (saved in the report
folder by `similarity.saved`, so later audits of other models can compare with it)."""

from __future__ import annotations

import pandas as pd
import torch

from llmaudit.chapters.decision_tasks.base import answer_ids
from llmaudit.chapters.similarity import stereoset, unqover
from llmaudit.chapters.similarity.bbq import LETTERS, prompt
from llmaudit.chapters.similarity.saved import QUESTION
from llmaudit.chapters.similarity.unqover_bias import scored
from llmaudit.chapters.steering_vectors import SteeringVector
from llmaudit.models import AuditModel
from llmaudit.models.ask import ask
from llmaudit.models.passes.required import required
from llmaudit.models.request import Edit, Keep, Request


def system_name(model: str, vector: SteeringVector | None, lam: float) -> str:
    """How a system is labelled across reports: the model's name, plus the steering when there is one."""
    return model if vector is None else f"{model} {vector.name} λ={lam:+g}"


def blocks_at(depths: list[float], n_layers: int) -> list[int]:
    """The blocks at relative depths in [0, 1] (0 = first block, 1 = last)."""
    return [round(d * (n_layers - 1)) for d in depths]


def relative_depths(depths: list[float] | None, n_layers: int) -> list[float]:
    """The relative depths compared: `depths` (none: no representations are read), or every block's (None), block i
    of n at i / (n - 1)."""
    return depths if depths is not None else [i / max(n_layers - 1, 1) for i in range(n_layers)]


def question_texts(model: AuditModel, questions: pd.DataFrame) -> list[str]:
    """The exact prompt the model reads for each BBQ question (chat turn and answer prefix), in row order."""
    return [model.chat(*prompt(row)) for row in questions.to_dict("records")]


def _systems(
    model: AuditModel, texts: list[str], vector: SteeringVector | None, lambdas: list[float], layers: list[int], *,
    desc: str, letters: tuple[str, ...] = LETTERS, keep: SteeringVector | None = None,
) -> list[tuple[str, torch.Tensor, torch.Tensor | None]]:
    """(system name, option-letter probabilities (`letters`, BBQ's by default), representations at `layers` or None
    without) of the model steered along `vector` at each lambda, one sweep (the plain model is not among them: its
    answers come from the unsteered pass); without a vector, of the plain model alone, unsteered, keeping its lower
    states at the block of the vector that steers it later (`keep`), where that sweep starts."""
    labels = answer_ids(model.tokenizer, letters)
    if vector is None:
        swept: list[float | None] = [None]
        out = ask(model, Request(texts=texts, labels=labels, layers=layers, desc=desc,
                                 keep=None if keep is None else Keep(blocks=(keep.layer,))))
    else:
        swept = list(lambdas)
        out = ask(model, Request(texts=texts, labels=labels, layers=layers, edit=Edit(vector=vector, lambdas=lambdas),
                                 desc=f"{desc} systems"))
    acts = required(out.acts, "representations") if layers else [None] * len(swept)
    return [(system_name(model.name, None if lam is None else vector, lam or 0.0), probs, reps)
            for lam, probs, reps in zip(swept, out.probs, acts)]


def run_systems(
    model: AuditModel, questions: pd.DataFrame, vector: SteeringVector | None, lambdas: list[float],
    depths: list[float] | None, *, represented: pd.DataFrame | None = None, keep: SteeringVector | None = None,
) -> tuple[pd.DataFrame, dict[str, torch.Tensor]]:
    """BBQ answers of the model steered along `vector` at each lambda (None: of the plain model, unsteered, `keep` as
    in `_systems`), with the representations at `depths` (None: every block; none: none read, as on an endpoint)
    keyed 'system|depth', of the questions `represented` in its row order (None: of every question, read in the
    answers' pass; else in a pass of their own, so that the answers' pass keeps no blocks)."""
    depths = relative_depths(depths, model.n_layers)
    layers = blocks_at(depths, model.n_layers)
    texts = question_texts(model, questions)
    answered = _systems(model, texts, vector, lambdas, layers if represented is None else [], desc="BBQ", keep=keep)
    read = answered if represented is None or not layers else _systems(
        model, question_texts(model, represented), vector, lambdas, layers, desc="BBQ representations")
    frames: list[pd.DataFrame] = []
    reps: dict[str, torch.Tensor] = {}
    for (name, probs, _), (_, _, acts) in zip(answered, read):
        frame = questions[QUESTION].assign(system=name, pred=probs.argmax(-1).numpy(), mass=probs.sum(-1).numpy())
        for i, letter in enumerate(LETTERS):
            frame[f"p_{letter}"] = (probs[:, i] / probs.sum(-1)).numpy()
        frames.append(frame)
        reps |= {f"{name}|{depth:g}": required(acts, "representations")[:, j].contiguous()
                 for j, depth in enumerate(depths)}
    return pd.concat(frames, ignore_index=True), reps


def run_stereoset(
    model: AuditModel, items: pd.DataFrame, vector: SteeringVector | None, lambdas: list[float], *,
    keep: SteeringVector | None = None,
) -> pd.DataFrame:
    """StereoSet forced-choice answers (`stereoset.chosen_kinds`, with the letters' mass) of the same systems as
    `run_systems`."""
    texts = [model.chat(*stereoset.prompt(row)) for row in items.to_dict("records")]
    return pd.concat([stereoset.chosen_kinds(items, probs.numpy()).assign(system=name, mass=probs.sum(-1).numpy())
                      for name, probs, _ in _systems(model, texts, vector, lambdas, [], desc="StereoSet", keep=keep)],
                     ignore_index=True)


def run_unqover(
    model: AuditModel, questions: pd.DataFrame, vector: SteeringVector | None, lambdas: list[float], *,
    keep: SteeringVector | None = None,
) -> pd.DataFrame:
    """UnQover's forced-choice answers of the same systems as `run_systems`: per question the scores s_a and s_b of
    its two subjects (each letter's share of the two letters' probability), with the letters' mass."""
    texts = [model.chat(*unqover.prompt(row)) for row in questions.to_dict("records")]
    return pd.concat([scored(questions, (probs / probs.sum(-1, keepdim=True)).numpy())
                      .assign(system=name, mass=probs.sum(-1).numpy())
                      for name, probs, _ in _systems(model, texts, vector, lambdas, [], desc="UnQover",
                                                     letters=unqover.LETTERS, keep=keep)],
                     ignore_index=True)
