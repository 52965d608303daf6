"""The similarity chapter at paper 003's sizes: all of BBQ and StereoSet when the sizes are null, CKA at every block on
a seeded share of the questions (kept apart from the answers' pass), and every pair of depths' CKA from Gram
matrices computed once each."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from llmaudit.chapters.similarity import compare
from llmaudit.chapters.similarity.bbq import load_bbq, stratified_sample
from llmaudit.chapters.similarity.compare import Grams, cka_across_depths, cka_matrix, linear_cka
from llmaudit.chapters.similarity.evaluate import blocks_at, relative_depths, run_systems
from llmaudit.chapters.similarity.plots import matrix
from llmaudit.chapters.similarity.saved import load_systems, save_systems
from llmaudit.chapters.similarity.spec import SimilarityParams
from llmaudit.chapters.similarity.stereoset import KINDS, load_stereoset, sample_items
from llmaudit.models import load_model
from llmaudit.models.loading.spec import ModelSpec
from llmaudit.models.loading.standin import build


def test_null_sizes_take_all_of_bbq_and_stereoset(mirror) -> None:
    bbq, items = load_bbq(mirror), load_stereoset(mirror)
    every = stratified_sample(bbq, None, seed=0)
    assert len(every) == len(bbq) > 58_000  # the whole benchmark, incomplete items included
    assert every[["category", "example_id"]].equals(bbq.sort_values(["category", "example_id"])[
        ["category", "example_id"]].reset_index(drop=True))
    forced = sample_items(items, None, seed=0)
    assert len(forced) == len(items) > 2_000 and set(forced["id"]) == set(items["id"])
    assert all(sorted(order.split("|")) == sorted(KINDS) for order in forced["order"])  # every item's order drawn


def test_paper_sizes_keep_representations_of_a_seeded_share() -> None:
    paper = SimilarityParams()
    assert (paper.per_cell, paper.stereoset, paper.depths) == (None, None, None)  # paper 003: all of both, every block
    assert paper.represented() == paper.cka_per_cell >= 1
    assert SimilarityParams(per_cell=4, depths=[0.5, 1.0]).represented() is None  # a light run keeps every question's
    assert SimilarityParams(per_cell=4, cka_per_cell=2).represented() == 2
    assert SimilarityParams(per_cell=4, cka_per_cell=None).represented() is None


def test_every_block_is_a_relative_depth() -> None:
    depths = relative_depths(None, 4)
    assert depths == pytest.approx([0, 1 / 3, 2 / 3, 1]) and blocks_at(depths, 4) == [0, 1, 2, 3]
    assert blocks_at(relative_depths(None, 32), 32) == list(range(32))
    assert blocks_at([float(f"{d:g}") for d in relative_depths(None, 32)], 32) == list(range(32))  # as saved
    assert relative_depths([0.5, 1.0], 32) == [0.5, 1.0]


def test_cka_of_every_pair_of_depths_computes_each_gram_once(monkeypatch) -> None:
    """Every block against every block: m x m pairs of two systems from 2 m Gram matrices, equal to the CKA of each
    pair on the questions it shares."""
    rng = np.random.default_rng(0)
    order = pd.DataFrame({"category": "Age", "example_id": range(30)})
    flipped = order.iloc[::-1].reset_index(drop=True)
    depths = [0.0, 0.25, 0.5, 0.75, 1.0]
    reps = {f"{name}|{d:g}": (order if name == "a" else flipped, rng.normal(size=(30, 7)))
            for name in ("a", "b") for d in depths}
    calls = []
    gram = compare._gram
    monkeypatch.setattr(compare, "_gram", lambda x: calls.append(1) or gram(x))
    grams = Grams(reps)
    table = cka_across_depths(reps, "a", "b", grams)
    assert table.shape == (5, 5) and len(calls) == 10
    x, y = reps["a|0.25"][1], reps["b|0.75"][1][::-1]  # b's rows back in a's question order
    assert table.loc[0.25, 0.75] == pytest.approx(linear_cka(x, y))
    cka_matrix(reps, 0.25, grams)
    assert len(calls) == 10  # the same Gram matrices serve the matrix between systems at one depth


def test_representations_of_the_share_come_from_their_own_pass(mirror, tmp_path) -> None:
    """The answers cover every question; the representations (every block) only the share, in its order, equal to
    those of the joint pass, and saved with that order."""
    tiny_model = load_model("tiny", ModelSpec(path=str(build("tiny", tmp_path / "tiny"))))  # the default tokenizer
    questions = stratified_sample(load_bbq(mirror, ["Age", "SES"]), 2, seed=0)
    share = stratified_sample(questions, 1, seed=0)
    answers, reps = run_systems(tiny_model, questions, None, [], None, represented=share)
    joint, every = run_systems(tiny_model, questions, None, [], None)
    assert len(answers) == len(questions) == 16 and answers["pred"].equals(joint["pred"])
    depths = relative_depths(None, tiny_model.n_layers)
    assert sorted(reps) == sorted(f"tiny|{d:g}" for d in depths)
    rows = questions.reset_index().merge(share, on=["category", "example_id"])["index"].to_numpy()
    for key, kept in reps.items():
        assert kept.shape == (len(share), tiny_model.width)
        assert np.allclose(kept.numpy(), every[key].numpy()[rows], atol=1e-5)
    save_systems(tmp_path / "tiny", answers, reps, represented=share)
    _, loaded = load_systems(tmp_path)
    order, _ = loaded[f"tiny|{depths[0]:g}"]
    assert order.equals(share[["category", "example_id"]].reset_index(drop=True))


def test_a_matrix_of_every_block_is_drawn_without_written_values() -> None:
    small, large = (pd.DataFrame(np.eye(n), index=range(n), columns=range(n)) for n in (4, 32))
    assert len(matrix(small, "CKA").to_dict()["layer"]) == 2  # cells and their values
    assert len(matrix(large, "CKA").to_dict()["layer"]) == 1  # 1,024 cells: colour alone
