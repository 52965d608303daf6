"""The scale test: the shipped paper-size profile (params/llama-3.1-8b-instruct.yaml) through all seven chapters on the
real data at the papers' sizes, with a tiny random-weight Llama (`models.loading.standin`: the default model's
tokenizer, built on the fly, no download) in place of the 8B model. It proves that nothing in the chapters, the charts,
the data splits, the report or the verdicts breaks with size; the model is random, so its numbers mean nothing, only
their presence.

Random weights read concepts weakly: as for a small model, the vectors use normalised scores and quantile splits
(`config.standin_params`). The similarity chapter runs a stratified share of BBQ and StereoSet, and markedness each
group's name alone (SIMILARITY and the markedness override below say why); every other size is the profile's. About 30
minutes at one thread (decision tasks about 12 of them, markedness 6 to 9); `make scale-test` runs it, and CI's `make
check` runs it beside `make test`, one thread each: 33 minutes in all from a fresh clone, install included."""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pandas as pd
import pytest
import yaml

from llmaudit.chapters.similarity.saved import load_systems
from llmaudit.chapters.steering_vectors.recipes import RECIPES
from llmaudit.config import standin_params
from llmaudit.models.loading.standin import build
from llmaudit.paths import PARAMS_DIR
from llmaudit.registry import KEYS, notebook
from llmaudit.report.gate import load_verdicts
from llmaudit.runner.audit import run_audit

pytestmark = pytest.mark.scale
PROFILE = PARAMS_DIR / "llama-3.1-8b-instruct.yaml"
SECOND = "standin-second"
# paper 003's sizes (all 58,492 BBQ questions and 2,106 StereoSet items, 205 times the token-blocks of these) ran
# at about 10 questions a second on two shared cores: over an hour and a half, projected. These run the same code with
# CKA at every block of the stand-in; the representations come from the answers' pass (cka_per_cell not below
# per_cell): a share's pass of its own, as the profile's, would add a third to this chapter's token-blocks here
# (0.75% at the profile's sizes), and tests/test_similarity_sizes.py checks it; UnQover 4 units per dimension (64
# questions, a few seconds; the profile's 160,000 would take hours here)
SIMILARITY = {"per_cell": 4, "stereoset": 25, "cka_per_cell": 4, "unqover": 4}

@pytest.fixture(scope="module")
def audited(tmp_path_factory, mirror) -> Path:
    """The report folder of the whole paper-size audit of the tiny stand-in."""
    root = tmp_path_factory.mktemp("scale")
    # a second, differently seeded stand-in answers the similarity chapter first, as a second model would
    second = standin_params(PROFILE, build("tiny", root / "second", seed=1), "float32") | {
        "name": SECOND, "chapters": ["similarity"]}
    second["similarity"] = {**second.get("similarity", {}), "lambdas": [], **SIMILARITY}
    params = standin_params(PROFILE, build("tiny", root / "model"), "float32")
    # Sampling's decoding steps dominate a CPU run at paper size: each step draws over the whole vocabulary from the
    # prompt's own stream, about a millisecond a row here. So the sampled chapters run every cell and (but one set)
    # every sentence at the paper's size with fewer steps, through the same code: paper 004's chain of thought
    # reasons for 8 tokens instead of 64, over 2 of its 5 seeds (the fewest an interval takes), each group by its
    # name alone (all 11 terms give 1.7 times the sentences), NS-Prompts' occupational sentences by a quarter of
    # their 888 templates (drawn by the templates size knob, the profile's own code path: they were 85% of the
    # chapter's sentences and most of the scale test's time); paper 001's answers stop at 8 tokens instead of 50.
    params["markedness"] = {**params.get("markedness", {}), "reasoning_tokens": 8, "all_terms": False,
                            "seeds": [2024, 2025], "templates": {"ns_prompts": 222}}
    params["framing"] = {**params.get("framing", {}), "max_new_tokens": 8}
    params["similarity"] = {**params.get("similarity", {}), "compare_with": [SECOND], **SIMILARITY}
    for name, values in ((SECOND, second), ("scale", params)):
        (root / f"{name}.yaml").write_text(yaml.safe_dump(values), encoding="utf-8")
        run_audit(str(root / f"{name}.yaml"), reports=root / "reports")
    return root / "reports" / f"standin-{PROFILE.stem}"


def test_every_chapter_runs_at_paper_size_into_the_report(audited) -> None:
    notebooks = sorted(audited.glob("[0-9][0-9]_*.ipynb"))
    assert [path.stem for path in notebooks] == [notebook(key) for key in KEYS]  # the profile runs every chapter
    for path in notebooks:
        errors = [o for cell in nbformat.read(path, as_version=4).cells for o in cell.get("outputs", [])
                  if o.get("output_type") == "error"]
        assert not errors, path.name
    report = (audited / "report.html").read_text(encoding="utf-8")
    assert report.count("<svg") >= 15  # the figures drew, thousands of rows and all
    assert json.loads((audited / "results.json").read_text(encoding="utf-8"))["verdicts"]


def test_data_splits_leave_every_task_its_paper_size(audited) -> None:
    results = pd.read_csv(audited / "results.csv")
    card = json.loads((audited / "model_card.json").read_text(encoding="utf-8"))
    sizes = yaml.safe_load(card["params"]["text"])["tasks"]["sizes"]
    tasks = results[results["chapter"] == "decision_tasks"].set_index("name")
    for task in ("judicial_conviction", "judicial_penalty", "admissions_gender", "admissions_race"):
        assert int(tasks.loc[f"{task}.blackbox_implicit", "n"]) == sizes[task], task
    for task in ("judicial_conviction", "judicial_penalty"):  # the paper's design: both speakers' texts swept
        for dialect in ("aal", "wme"):
            assert int(tasks.loc[f"{task}.whitebox_slope_{dialect}", "n"]) == sizes[task], task
    for task in ("credit", "admissions_gender", "admissions_race"):  # the dependence tests ran at the task's size
        assert {f"{task}.blackbox_dependence", f"{task}.whitebox_dependence", f"{task}.whitebox_eq2"} <= set(
            tasks.index), task
    spans = results[results["name"].str.endswith(".steered_score_span")]
    assert len(spans) == len(RECIPES)  # every vector's causal check found held-out rows


def test_similarity_compares_two_different_models_across_depths(audited) -> None:
    results = pd.read_csv(audited / "results.csv").set_index("name")["value"]
    for kind in ("diagonal", "full"):
        assert 0 < float(results[f"similarity.cka_{kind}.{SECOND}"]) < 1  # two random networks: related, not equal
    assert {"stereoset.ss", "stereoset.icat"} <= set(results.index)
    # paper 003's base-to-tuned reading of the other model, and CKA at every block
    assert {f"similarity.unk_flip_from.{SECOND}", f"similarity.s_amb_change.{SECOND}"} <= set(results.index)
    _, reps = load_systems(audited.parent, [audited.name])
    plain = [key for key in reps if "λ" not in key]
    assert len(plain) == 4 and {len(order) for order, _ in reps.values()} == {4 * 11 * SIMILARITY["cka_per_cell"]}
    index = (audited.parent / "index.html").read_text(encoding="utf-8")
    assert SECOND in index and "StereoSet" in index


def test_verdict_page_reads_the_paper_size_report(audited) -> None:
    table = load_verdicts(audited)
    assert len(table) >= 25
