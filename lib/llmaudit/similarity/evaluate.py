"""Run BBQ on one model as several "systems" (the model as it is, and the model steered along a vector at each
lambda): per question the option probabilities and the argmax answer, and last-token representations at chosen
relative depths for CKA. Saved in the report folder, so later audits of other models can compare with it."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import load_file, save_file

from llmaudit.cache import cached_tensors
from llmaudit.errors import AuditError
from llmaudit.models import AuditModel
from llmaudit.similarity.bbq import LETTERS, prompt
from llmaudit.steering import SteeringVector
from llmaudit.tasks.base import answer_ids

FOLDER = "similarity"
QUESTION = ["category", "example_id", "question_index", "polarity", "context_condition", "label", "unknown_index",
            "target_index"]


def system_name(model: str, vector: SteeringVector | None, lam: float) -> str:
    """How a system is labelled across reports: the model's name, plus the steering when there is one."""
    return model if vector is None else f"{model} {vector.name} λ={lam:+g}"


def blocks_at(depths: list[float], n_layers: int) -> list[int]:
    """The blocks at relative depths in [0, 1] (0 = first block, 1 = last)."""
    return [round(d * (n_layers - 1)) for d in depths]


def run_systems(
    model: AuditModel, questions: pd.DataFrame, vector: SteeringVector | None, lambdas: list[float],
    depths: list[float],
    *, batch_tokens: int, cache: Path | None = None,
) -> tuple[pd.DataFrame, dict[str, torch.Tensor]]:
    """Answers of the plain model and of the model steered at each lambda (one traced pass each, which also reads
    the representations), and representations keyed 'system|depth'."""
    texts = [model.chat(*prompt(row)) for row in questions.to_dict("records")]
    labels, layers = answer_ids(model.tokenizer, LETTERS), blocks_at(depths, model.n_layers)
    frames, reps = [], {}
    for lam in [None, *lambdas]:
        edit = None if lam is None else vector.intervention(lam)
        name = system_name(model.name, None if lam is None else vector, lam or 0.0)
        key = {"model": model.identity, "prompts": texts, "labels": labels, "layers": layers,
               "edit": None if edit is None else [lam, *vector.fingerprint()]}

        def run() -> dict[str, torch.Tensor]:
            out = model.forward(texts, labels, layers, edit, batch_tokens=batch_tokens, desc=f"BBQ {name}")
            return {"probs": out.probs, "acts": out.acts}

        result = cached_tensors(cache, key, run)
        probs = result["probs"]
        frame = questions[QUESTION].assign(system=name, pred=probs.argmax(-1).numpy(), mass=probs.sum(-1).numpy())
        for i, letter in enumerate(LETTERS):
            frame[f"p_{letter}"] = (probs[:, i] / probs.sum(-1)).numpy()
        frames.append(frame)
        reps |= {f"{name}|{depth:g}": result["acts"][:, j].contiguous() for j, depth in enumerate(depths)}
    return pd.concat(frames, ignore_index=True), reps


def save_systems(report_dir: Path, answers: pd.DataFrame, reps: dict[str, torch.Tensor]) -> None:
    """Write answers.csv and representations.safetensors under the report's similarity folder."""
    folder = Path(report_dir) / FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    answers.to_csv(folder / "answers.csv", index=False)
    order = answers.drop_duplicates(["category", "example_id"])[["category", "example_id"]].to_dict("list")
    save_file(reps, folder / "representations.safetensors", metadata={"order": json.dumps(order)})


def load_systems(
    reports: Path, models: list[str] | None = None
) -> tuple[pd.DataFrame, dict[str, tuple[pd.DataFrame, torch.Tensor]]]:
    """The systems saved under `reports` by the listed report folders (all when None): all answers, and per
    'system|depth' its question order (category, example_id) with the representations in that order. A damaged
    file is a one-line AuditError naming it and the chapter that writes it again."""
    folders = sorted(Path(reports).glob(f"*/{FOLDER}")) if models is None else [
        Path(reports) / model / FOLDER for model in models]
    answers, reps = [], {}
    for folder in folders:
        if not (folder / "answers.csv").exists():
            if models is not None:
                raise AuditError(f"no similarity results in {folder.parent}: run its audit's similarity chapter first")
            continue
        answers.append(_read_answers(folder / "answers.csv"))
        order, tensors = _read_representations(folder / "representations.safetensors")
        reps |= {key: (order, tensor) for key, tensor in tensors.items()}
    return (pd.concat(answers, ignore_index=True) if answers else pd.DataFrame()), reps


def _read_answers(path: Path) -> pd.DataFrame:
    """A saved answers.csv, checked for the columns the comparisons read."""
    try:
        answers = pd.read_csv(path)
    except (OSError, ValueError) as err:  # ValueError: not UTF-8, not CSV, empty
        raise _damaged(path, " ".join(str(err).split())) from None
    missing = [column for column in [*QUESTION, "system", "pred"] if column not in answers]
    if missing:
        raise _damaged(path, f"no column {', '.join(missing)}")
    return answers


def _read_representations(path: Path) -> tuple[pd.DataFrame, dict[str, torch.Tensor]]:
    """A saved representations.safetensors: the question order of its rows, and its tensors by 'system|depth'."""
    try:
        with safe_open(str(path), framework="pt") as handle:
            order = pd.DataFrame(json.loads((handle.metadata() or {})["order"]))
        return order, load_file(path)
    except (OSError, ValueError, KeyError, SafetensorError) as err:  # KeyError: no question order
        raise _damaged(path, f"{type(err).__name__}: {' '.join(str(err).split())}") from None


def _damaged(path: Path, problem: str) -> AuditError:
    """The one-line error for a damaged file of a report's similarity folder."""
    return AuditError(f"similarity results {path} are damaged ({problem}): rerun the similarity chapter of "
                      f"{path.parent.parent.name}")
