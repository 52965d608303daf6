"""The black-box parts of the validity and similarity chapters on a model behind an endpoint that returns
log-probabilities (exact mode): `llmaudit audit --endpoint` against a standard-library server scripted to answer every
prompt with a window holding the chapters' answer words (a probability of each drawn from the prompt, so that prompts
differ) records validity's name gap (its verdict test) and black-box Sobol' shifts and similarity's BBQ, StereoSet and
UnQover scores with values, while the white-box rows (steered systems, white-box Sobol' shifts, CKA) are absent:
the endpoint exposes no weights. Every request the server received is unsteered and asks for no block outputs."""

from __future__ import annotations

import hashlib
import math

import numpy as np
from transformers import AutoTokenizer

from llmaudit.chapters.decision_tasks import TASKS
from llmaudit.chapters.decision_tasks.base import answer_ids
from llmaudit.chapters.similarity import bbq, unqover
from llmaudit.chapters.validity.spec import NAMES_IMPLICIT
from llmaudit.cli import main
from llmaudit.models.loading.standin import build
from llmaudit.report import Results
from llmaudit.verdict.verdicts import NOT_MEASURABLE, verdicts
from servers import completion, scripted


def _words(folder) -> list[str]:
    """Every answer word the two chapters read, as the server spells it (the tokenizer's decoding of its label)."""
    tokenizer = AutoTokenizer.from_pretrained(folder)
    answers = [task.answers for task in TASKS.values()] + [bbq.LETTERS, unqover.LETTERS]
    return sorted({tokenizer.decode([label]) for words in answers for label in answer_ids(tokenizer, words)})


def _reply(words: list[str]):
    """A completion whose window holds every answer word, each word's probability drawn from the prompt."""
    def reply(request: dict) -> dict:
        seed = int.from_bytes(hashlib.sha256(request["prompt"].encode()).digest()[:8], "little")
        probs = np.random.default_rng(seed).dirichlet(np.ones(len(words))) * 0.9
        return completion(words[int(probs.argmax())], {word: math.log(p) for word, p in zip(words, probs)})
    return reply


def test_validity_and_similarity_black_box_tests_are_measured_on_an_endpoint(tmp_path, mirror, monkeypatch):
    monkeypatch.setenv("LLMAUDIT_DATA", str(mirror))
    standin = build("tiny", tmp_path / "standin")
    reports = tmp_path / "reports"
    with scripted([(200, {}, _reply(_words(standin)), 0.0)]) as (url, received):
        argv = ["audit", "--endpoint", url, "--model", str(standin), "--profile", "ci", "--reports", str(reports),
                "--chapter", "validity", "--chapter", "similarity"]
        assert main(argv) == 0
    assert received and all("logprobs" in body and "echo" not in body for body in received)
    (report,) = [path for path in reports.iterdir() if path.is_dir()]
    results = Results(report / "results.csv").table().set_index("name")
    measured = results["value"].notna()
    # validity: the name gap (its verdict test), every filter's, the slope by name bin, the black-box Sobol' shifts
    assert measured[NAMES_IMPLICIT] and results.at[NAMES_IMPLICIT, "n"] >= 2
    assert measured[[name for name in results.index if name.startswith("credit.names_not_")]].all()
    shifts = results.index[results.index.str.contains(".sobol_shift.")]
    assert len(shifts) and measured[shifts].all() and shifts.str.contains("black-box_").all()
    # similarity: the model's own BBQ, StereoSet and UnQover scores; no steered system, no CKA
    for name in ("bbq.s_amb", "bbq.s_dis", "bbq.acc_dis", "bbq.answer_mass", "stereoset.ss", "unqover.answer_mass"):
        assert measured[name], name
    assert results.index.str.startswith("unqover.gender.").any()
    assert not results.index.str.contains("steered|cka").any()
    table = verdicts(Results(report / "results.csv").table()).set_index("name")
    assert table.at[NAMES_IMPLICIT, "verdict"] != NOT_MEASURABLE and np.isfinite(table.at[NAMES_IMPLICIT, "score"])
