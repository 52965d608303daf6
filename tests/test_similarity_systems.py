"""The similarity chapter's systems: saved answers and representations read back in question order, pairwise
UNK flips and CKA on the questions two systems share."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from llmaudit.chapters.similarity.compare import cka_across_depths, cka_matrix, cka_summary, linear_cka, unk_flip_matrix
from llmaudit.chapters.similarity.evaluate import blocks_at
from llmaudit.chapters.similarity.saved import QUESTION, load_systems, save_systems
from llmaudit.errors import AuditError


def answers(system: str, preds: list[int], ids: list[int]) -> pd.DataFrame:
    """Negative ambiguous questions with the target at option 0 and Unknown at option 2."""
    rows = [dict(zip(QUESTION, ("Age", i, 1, "neg", "ambig", 2, 2, 0))) for i in ids]
    return pd.DataFrame(rows).assign(system=system, pred=preds)


def test_saved_systems_come_back_with_their_question_order(tmp_path) -> None:
    rng = np.random.default_rng(0)
    x = torch.tensor(rng.normal(size=(4, 6)), dtype=torch.float32)
    save_systems(tmp_path / "m", answers("m", [0, 0, 2, 1], [0, 4, 8, 12]), {"m|1": x})
    y = torch.tensor(rng.normal(size=(3, 5)), dtype=torch.float32)
    save_systems(tmp_path / "n", answers("n", [2, 2, 2], [12, 0, 4]), {"n|1": y})
    loaded, reps = load_systems(tmp_path)
    assert set(loaded["system"]) == {"m", "n"} and np.array_equal(reps["m|1"][1], x.numpy())
    assert reps["n|1"][0]["example_id"].tolist() == [12, 0, 4]
    only, _ = load_systems(tmp_path, ["n"])
    assert set(only["system"]) == {"n"}
    with pytest.raises(AuditError, match="similarity chapter"):
        load_systems(tmp_path, ["absent"])


def test_unk_flip_matrix_on_shared_questions() -> None:
    table = pd.concat([answers("base", [0, 0, 1, 0], [0, 4, 8, 12]), answers("tuned", [2, 0, 2], [0, 4, 8])])
    flips = unk_flip_matrix(table)
    assert flips.loc["base", "tuned"] == pytest.approx(2 / 3)  # base commits on 0, 4, 8: two turn Unknown
    assert flips.loc["base", "base"] == 0.0 and flips.loc["tuned", "base"] == 0.0  # tuned commits only on 4


def test_cka_matrix_aligns_questions_across_orders() -> None:
    rng = np.random.default_rng(1)
    x = rng.normal(size=(50, 8))
    rotation = np.linalg.qr(rng.normal(size=(8, 8)))[0]
    order = pd.DataFrame({"category": "Age", "example_id": range(50)})
    shuffled = rng.permutation(50)
    reps = {"a|1": (order, x), "b|1": (order.iloc[shuffled].reset_index(drop=True), (x @ rotation)[shuffled]),
            "c|1": (order, rng.normal(size=(50, 3))), "a|0.5": (order, x)}
    cka = cka_matrix(reps, 1.0)
    assert list(cka.index) == ["a", "b", "c"] and cka.loc["a", "b"] == pytest.approx(1.0)
    assert cka.loc["a", "c"] < 0.3 and cka.loc["c", "c"] == pytest.approx(1.0)


def test_cka_across_depths_pairs_every_depth_of_two_models_on_shared_questions() -> None:
    rng = np.random.default_rng(2)
    order = pd.DataFrame({"category": "Age", "example_id": range(40)})
    shallow, deep, other = rng.normal(size=(40, 6)), rng.normal(size=(40, 6)), rng.normal(size=(40, 4))
    # model b (width 4) holds a's shallow representation, rotated, at its depth 0.5, in another question order
    flipped = order.iloc[::-1].reset_index(drop=True)
    reps = {"a|0.5": (order, shallow), "a|1": (order, deep),
            "b|0.5": (flipped, (shallow @ np.linalg.qr(rng.normal(size=(6, 6)))[0])[::-1]),
            "b|1": (order, other), "b|0.25": (order, other)}
    table = cka_across_depths(reps, "a", "b")
    assert list(table.index) == [0.5, 1.0] and list(table.columns) == [0.25, 0.5, 1.0]
    assert table.loc[0.5, 0.5] == pytest.approx(1.0)
    assert table.loc[1.0, 1.0] == pytest.approx(linear_cka(deep, other))
    # paper 003's summaries by hand: the depths both hold (0.5, 1) on the diagonal; all six pairs for the full matrix
    summary = cka_summary(table)
    assert summary["diagonal"] == pytest.approx((1.0 + linear_cka(deep, other)) / 2)
    assert summary["full"] == pytest.approx(table.to_numpy().mean())
    with pytest.raises(AuditError, match="absent"):
        cka_across_depths(reps, "a", "absent")


def test_blocks_at_relative_depths() -> None:
    assert blocks_at([0.0, 0.5, 1.0], 30) == [0, 14, 29]


def test_saved_systems_are_read_without_torch() -> None:
    """The cross-model index reads other reports' systems: that must not load torch or any model code."""
    import subprocess
    import sys

    code = ("import sys, llmaudit.chapters.similarity.saved; "
            "print(sorted(m for m in ('torch', 'llmaudit.models') if m in sys.modules))")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert run.stdout.strip() == "[]"



def test_audit_stops_before_any_chapter_when_a_compared_model_has_no_results(tmp_path) -> None:
    import yaml

    from llmaudit.chapters.similarity.across import compared_ready
    from llmaudit.config import load_params, params_path
    from llmaudit.errors import ConfigError
    from llmaudit.runner.audit import run_audit

    params = yaml.safe_load(params_path("ci").read_text()) | {"name": "m"}
    params["similarity"] = {**params["similarity"], "compare_with": ["other"]}
    (tmp_path / "m.yaml").write_text(yaml.safe_dump(params))
    with pytest.raises(ConfigError, match="audit other first"):
        run_audit(str(tmp_path / "m.yaml"), reports=tmp_path / "reports")
    assert not (tmp_path / "reports" / "m").exists()  # no chapter ran, no folder was made
    save_systems(tmp_path / "reports" / "other", answers("other", [0], [0]), {"other|1": torch.ones(1, 2)})
    compared_ready(load_params(tmp_path / "m.yaml"), tmp_path / "reports")  # once audited, the audit goes on


def test_against_others_reads_the_base_model_as_paper_003_does() -> None:
    """By hand: the base commits on questions 0, 4, 8 (biased, biased, counter-biased) and answers 12 Unknown; the
    tuned model answers 0 Unknown too. Base s = 100 (2 * 2/3 - 1) = 33.3, s_AMB = (1 - 1/4) 33.3 = 25; tuned s = 0.
    On the disambiguated question 1 the base answers biased (s_DIS 100), the tuned model counter-biased (-100): of the
    base's 4 committed answers the tuned model turns 1 into Unknown."""
    from llmaudit.chapters.similarity.tables import against_others

    def system(name: str, preds: list[int], ids: list[int], disambiguated: int) -> pd.DataFrame:
        told = answers(name, [disambiguated], [1]).assign(context_condition="disambig", label=0)
        return pd.concat([answers(name, preds, ids), told])

    table = pd.concat([system("m", [2, 0, 1, 2], [0, 4, 8, 12], 1), system("m g λ=+1", [2, 2, 2, 2], [0, 4, 8, 12], 1),
                       system("base", [0, 0, 1, 2, 0], [0, 4, 8, 12, 16], 0)])  # 16: the base's alone, left out
    found = against_others(table, unk_flip_matrix(table), "m")
    assert list(found.table.index) == ["base"]  # the steered copy is this model's, not another one
    row = found.table.loc["base"]
    assert row["s_amb"] == pytest.approx(25.0) and row["s_amb_change"] == pytest.approx(-25.0)
    assert row["s_dis"] == pytest.approx(100.0) and row["s_dis_change"] == pytest.approx(-200.0)
    assert row["unk_flip_from"] == pytest.approx(1 / 4) and row["questions"] == 5
    assert found.results.loc["similarity.unk_flip_from.base", "value"] == pytest.approx(1 / 4)
    assert found.results.loc["similarity.s_amb_change.base", "value"] == pytest.approx(-25.0)
