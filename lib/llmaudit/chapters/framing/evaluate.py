"""Run the framing prompts (Measuring Bias or Measuring the Task): next-token pronoun mass per prompt, seeded sampled
answers with their detected pronoun (the chosen form's both from one pass), the same mass under gender steering, and
each prompt's position on the gender vector."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd
import torch

from llmaudit.chapters.framing.metrics import KEYS
from llmaudit.chapters.framing.pronouns import FAMILIES, detect_pronoun, family_probs, family_token_ids
from llmaudit.chapters.framing.stimuli import FramingPrompt, shuffle_options
from llmaudit.chapters.steering_vectors import SteeringVector
from llmaudit.models import AuditModel
from llmaudit.models.ask import ask
from llmaudit.models.passes.required import required
from llmaudit.models.request import Edit, Keep, Request, SampleCall, SampleRequest
from llmaudit.models.sampling.release import Decoding, release_decoding


def versions(prompts: Sequence[FramingPrompt], seeds: Sequence[int]) -> list[FramingPrompt]:
    """Each choice prompt once per seed with its options shuffled by that seed; completion prompts once."""
    return [v for p in prompts for v in ([shuffle_options(p, s) for s in seeds] if p.kind == "choice" else [p])]


def texts(model: AuditModel, prompts: Sequence[FramingPrompt], form: str) -> list[str]:
    """The model's input for each prompt in `form` "chat" (one chat turn) or "plain" (the plain text after the
    tokenizer's usual BOS, for the LM to continue)."""
    return [model.chat(p.text) if form == "chat" else model.plain(p.text) for p in prompts]


def sampler_decoding(model: AuditModel, choice: str) -> Decoding:
    """The sampler's settings for a params `decoding`: "release", the model's release decoding (the paper's, §4.1),
    or "full_vocabulary", temperature 1 over the whole vocabulary (ours)."""
    return release_decoding(model) if choice == "release" else Decoding()


def _label_space(model: AuditModel, prompts: Sequence[FramingPrompt]) -> tuple[list[int], list[dict[str, list[int]]]]:
    """All token ids any prompt reads (pronoun forms and option letters), and each prompt's families as
    positions in that list, so one forward pass keeps only these columns."""
    families = [family_token_ids(model.tokenizer, p.letters) for p in prompts]
    space = sorted({i for fam in families for ids in fam.values() for i in ids})
    where = {token: k for k, token in enumerate(space)}
    return space, [{f: [where[i] for i in fam[f]] for f in FAMILIES} for fam in families]


def _families(probs: torch.Tensor, positions: list[dict[str, list[int]]]) -> torch.Tensor:
    """(n, 3) he / she / they shares from label-space probabilities, each row with its own letter mapping."""
    return torch.cat([family_probs(row[None], pos, log=False) for row, pos in zip(probs, positions)]).float()


def _tidy(prompts: Sequence[FramingPrompt], shares: torch.Tensor, **extra) -> pd.DataFrame:
    """One row per prompt: its cell, the he / she / they shares and any extra columns."""
    cells = pd.DataFrame([(p.attribute, p.task, p.gender, p.instr) for p in prompts], columns=KEYS)
    return pd.concat([cells, pd.DataFrame(shares.numpy(), columns=list(FAMILIES)), pd.DataFrame(extra)], axis=1)


def token_probabilities(
    model: AuditModel, prompts: Sequence[FramingPrompt], form: str, *, vector: SteeringVector | None = None,
) -> pd.DataFrame:
    """Per prompt: he / she / they share of the first generated position's pronoun mass (option letters count
    for their pronoun), the raw pronoun mass, and (given a vector) the prompt's projection on it."""
    inputs, (space, positions) = texts(model, prompts, form), _label_space(model, prompts)
    layers = [vector.layer] if vector is not None else []

    out = ask(model, Request(texts=inputs, labels=space, layers=layers, desc=f"framing {form}"))
    acts = required(out.acts, "block outputs")[0, :, 0] if layers else None
    return _scored(prompts, positions, out.probs[0], acts, vector)


def _scored(prompts: Sequence[FramingPrompt], positions: list[dict[str, list[int]]], probs: torch.Tensor,
            acts: torch.Tensor | None, vector: SteeringVector | None) -> pd.DataFrame:
    """`token_probabilities`' table from the label-space probabilities and the last token's outputs at the vector's
    block."""
    extra = {"mass": probs.sum(-1).numpy()}
    if vector is not None:
        extra["projection"] = vector.project(required(acts, "block outputs").float()).numpy()
    return _tidy(prompts, _families(probs, positions), **extra)


def steered_probabilities(
    model: AuditModel, prompts: Sequence[FramingPrompt], vector: SteeringVector, lambdas: Sequence[float], *,
    form: str,
) -> pd.DataFrame:
    """token_probabilities of the prompts in `form` with the gender vector's edit at each lambda (column lam), from
    the prompts' states below the edit that `sampled_pass` keeps when they are in the tensor cache."""
    inputs, (space, positions) = texts(model, prompts, form), _label_space(model, prompts)
    probs = ask(model, Request(texts=inputs, labels=space, edit=Edit(vector=vector, lambdas=lambdas), keep=Keep(),
                               desc="framing steered")).probs
    return pd.concat([_tidy(prompts, _families(p, positions)).assign(lam=lam)
                      for lam, p in zip(lambdas, probs)], ignore_index=True)


def sampled_pass(
    model: AuditModel, prompts: Sequence[FramingPrompt], samples: int, max_new_tokens: int, seed: int, *,
    form: str, decoding: Decoding, vector: SteeringVector | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The prompts in `form` in one pass over their texts: `token_probabilities` of every shown version
    (`versions(prompts, range(samples))`, in that order) and `samples` sampled answers per cell (with `decoding`,
    seeded per prompt; a choice cell uses one shuffled option order per sample) with its prompt text and the pronoun
    family it names (None: invalid output). The token probabilities are the model's own next-token distribution,
    whatever the decoding. The sampler's prefill reads the next-token probabilities a scoring pass would
    (`models.sampling.batched`). Prompts run together in batches of the model's token budget, each cached on its own (an
    interrupted run keeps the batches done). Given a vector, the completion prompts' states at its block are kept for
    `steered_probabilities`."""
    shown = [versions([p], range(samples)) for p in prompts]
    space, positions = _label_space(model, [v for versions_ in shown for v in versions_])
    layers = [vector.layer] if vector is not None else []
    calls = [SampleCall(texts=texts(model, versions_, form), per_text=1 if p.kind == "choice" else samples,
                        seed=seed + i) for i, (p, versions_) in enumerate(zip(prompts, shown))]
    # a completion prompt is one text, its own only version: its states at the vector's block are kept
    free = [call.texts[0] for p, call in zip(prompts, calls) if p.kind == "completion"]
    out = ask(model, SampleRequest(calls=calls, max_new_tokens=max_new_tokens, temperature=decoding.temperature,
                                   top_k=decoding.top_k, top_p=decoding.top_p, labels=space, layers=layers,
                                   keep=Keep(blocks=layers, texts=free), desc=f"framing {form} sampled"))
    scored = _scored([v for versions_ in shown for v in versions_], positions, out.probs[0],
                     required(out.acts, "block outputs")[0, :, 0] if layers else None, vector)
    rows = []
    for prompt, versions_, call, tokens in zip(prompts, shown, calls, out.tokens):
        repeat = len(tokens) // len(versions_)
        for version, text, row in zip(versions_ * repeat, list(call.texts) * repeat, tokens):
            answer = model.tokenizer.decode([t for t in row.tolist() if t >= 0], skip_special_tokens=True)
            rows.append({**dict(zip(KEYS, (prompt.attribute, prompt.task, prompt.gender, prompt.instr))),
                         "prompt": text, "answer": answer, "family": detect_pronoun(answer, version.letters)})
    return scored, pd.DataFrame(rows)
