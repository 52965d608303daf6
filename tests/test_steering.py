"""Tests for the Chapter 1 maths on plain tensors: WMD, interventions, layer choice, scale, concept split,
vector files and the tensor cache."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import torch
import torch.nn.functional as F

from conftest import lower_positions
from llmaudit.cache import cached_tensors, digest
from llmaudit.chapters.steering_vectors import Intervention, SteeringVector
from llmaudit.chapters.steering_vectors.concept import ConceptTokens, concept_tokens, split, split_counts, thresholds
from llmaudit.chapters.steering_vectors.selection import (
    choose_layer,
    eligible_layers,
    layer_metrics,
    projections,
    scale,
)
from llmaudit.chapters.steering_vectors.wmd import wmd
from llmaudit.errors import AuditError
from llmaudit.ledger import Ledger

# --- WMD -----------------------------------------------------------------------------------------------------------


def planted(n=400, layers=3, width=16, noise=0.05, seed=0):
    gen = torch.Generator().manual_seed(seed)
    u = F.normalize(torch.randn(layers, width, generator=gen), dim=-1)
    base = 3 * torch.randn(layers, width, generator=gen)
    s = torch.rand(n, generator=gen, dtype=torch.float64).float() * 2 - 1
    acts = base + s[:, None, None] * u + noise * torch.randn(n, layers, width, generator=gen)
    return acts, s, u, base


def test_wmd_recovers_planted_direction() -> None:
    acts, s, u, base = planted()
    tau = 0.1
    direction, mean = wmd(acts, s, -tau, tau)
    assert direction.shape == (3, 16) and mean.shape == (3, 16)
    torch.testing.assert_close(direction.norm(dim=-1), torch.ones(3), atol=1e-5, rtol=0)
    cos = (direction * u).sum(-1)
    assert (cos > 0.95).all(), cos  # sign matters: +v points towards the positive side
    neutral = s.abs() <= tau
    torch.testing.assert_close(mean, acts[neutral].mean(0), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(mean, base, atol=0.1, rtol=0)


def test_wmd_matches_spec_formula() -> None:
    """Reference computation of the WMD formula (main paper §3.3) in numpy, with skewed scores so weighting matters."""
    gen = torch.Generator().manual_seed(5)
    acts = torch.randn(30, 2, 5, generator=gen)
    s = torch.tensor([0.9, 0.3, 0.2, 0.6, -0.8, -0.1, -0.5, -0.9, 0.0, 0.01] * 3) + 0.001 * torch.arange(30)
    low, high = -0.05, 0.05
    direction, mean = wmd(acts, s, low, high)
    a, sc = acts.double().numpy(), s.double().numpy()
    pos, neg, neu = sc > high, sc < low, (sc >= low) & (sc <= high)
    mu0 = a[neu].mean(0)

    def side(mask):
        w = sc[mask] / sc[mask].sum()
        return np.einsum("n,nld->ld", w, a[mask] - mu0)

    def norm(x):
        return x / np.linalg.norm(x, axis=-1, keepdims=True)

    expected = norm(norm(side(pos)) - norm(side(neg)))
    np.testing.assert_allclose(direction.numpy(), expected, atol=1e-5)
    np.testing.assert_allclose(mean.numpy(), mu0, atol=1e-5)


@pytest.mark.parametrize("drop", ["positive", "negative", "neutral"])
def test_wmd_needs_two_rows_per_side(drop) -> None:
    acts, s, _, _ = planted(n=60)
    keep = {
        "positive": ~(s > 0.1) | (torch.arange(60) == int(torch.nonzero(s > 0.1)[0])),
        "negative": ~(s < -0.1) | (torch.arange(60) == int(torch.nonzero(s < -0.1)[0])),
        "neutral": ~(s.abs() <= 0.1),
    }[drop]
    with pytest.raises(AuditError) as info:
        wmd(acts[keep], s[keep], -0.1, 0.1)
    message = str(info.value)
    assert "\n" not in message
    assert drop in message


# --- interventions -------------------------------------------------------------------------------------------------


def test_projection_intervention_sets_coordinate_and_keeps_orthogonal_part() -> None:
    gen = torch.Generator().manual_seed(1)
    v = F.normalize(torch.randn(16, generator=gen), dim=0)
    mu0 = torch.randn(16, generator=gen)
    h = 5 * torch.randn(3, 7, 16, generator=gen)
    for alpha in (-1.3, 0.0, 2.5):
        out = Intervention(2, v, alpha, mu0)(h)
        assert out.shape == h.shape
        torch.testing.assert_close((out - mu0) @ v, torch.full((3, 7), alpha), atol=1e-5, rtol=0)
        orth = lambda x: x - (x @ v).unsqueeze(-1) * v  # noqa: E731
        torch.testing.assert_close(orth(out), orth(h), atol=1e-5, rtol=0)


def test_additive_intervention() -> None:
    gen = torch.Generator().manual_seed(2)
    v = F.normalize(torch.randn(16, generator=gen), dim=0)
    h = torch.randn(4, 5, 16, generator=gen)
    assert torch.equal(Intervention(0, v, 0.0)(h), h)
    out = Intervention(0, v, 1.7)(h)
    torch.testing.assert_close(out @ v - h @ v, torch.full((4, 5), 1.7), atol=1e-5, rtol=0)
    torch.testing.assert_close(out - h, (1.7 * v).expand_as(h), atol=1e-6, rtol=0)


def test_intervention_keeps_dtype() -> None:
    v = F.normalize(torch.ones(8), dim=0)
    h = torch.randn(2, 3, 8, dtype=torch.bfloat16)
    assert Intervention(0, v, 1.0, torch.zeros(8))(h).dtype == torch.bfloat16
    assert Intervention(0, v, 1.0)(h).dtype == torch.bfloat16


def test_vector_intervention_uses_lambda_times_k() -> None:
    v = F.normalize(torch.arange(1.0, 9.0), dim=0)
    vec = SteeringVector("x", "gender", 3, v, torch.ones(8), k=0.25)
    proj = vec.intervention(2.0)
    assert proj.layer == 3 and proj.alpha == pytest.approx(0.5) and torch.equal(proj.mean, torch.ones(8))
    add = vec.intervention(-4.0, projection=False)
    assert add.mean is None and add.alpha == pytest.approx(-1.0)
    h = torch.randn(5, 8)
    torch.testing.assert_close(vec.project(proj(h)), torch.full((5,), 0.5), atol=1e-5, rtol=0)


# --- layer choice and scale ----------------------------------------------------------------------------------------


def projections_with_best(best: int, n_layers=6, n=300, seed=0):
    gen = torch.Generator().manual_seed(seed)
    s = torch.rand(n, generator=gen) * 2 - 1
    noise = torch.full((n_layers,), 1.0)
    noise[best] = 0.05
    p = s[:, None] * 2 + noise * torch.randn(n, n_layers, generator=gen)
    return p, s


def test_choose_layer_picks_best_correlated_layer() -> None:
    p, s = projections_with_best(2)
    corr, sep = layer_metrics(p, s)
    assert int(torch.argmax(corr)) == 2
    assert choose_layer(corr, sep, 0.05) == 2


def test_best_layer_in_dropped_tail_is_not_chosen() -> None:
    n_layers = 20
    assert eligible_layers(n_layers, 0.05) == 19
    assert eligible_layers(30, 0.05) == 28  # ceil(1.5) = 2 layers dropped
    assert eligible_layers(30, 0.0) == 30
    p, s = projections_with_best(19, n_layers=n_layers)
    corr, sep = layer_metrics(p, s)
    assert int(torch.argmax(corr - sep)) == 19
    chosen = choose_layer(corr, sep, 0.05)
    assert chosen != 19 and chosen < 19
    assert chosen == int(torch.argmax((corr - sep)[:19]))


def test_layer_metrics_corr_matches_numpy() -> None:
    gen = torch.Generator().manual_seed(3)
    p = torch.randn(50, 4, generator=gen)
    s = torch.randn(50, generator=gen) + 0.3 * p[:, 1]
    corr, sep = layer_metrics(p, s)
    expected = [np.corrcoef(p[:, layer].numpy(), s.numpy())[0, 1] for layer in range(4)]
    np.testing.assert_allclose(corr.numpy(), expected, atol=1e-6)
    assert corr.shape == sep.shape == (4,)


def test_layer_metrics_sep_by_hand() -> None:
    s = torch.tensor([0.5, -0.2, 0.1, -0.4])
    p = torch.tensor([[1.0, 1.0], [-2.0, 3.0], [-0.5, 1.0], [-1.0, 2.0]])
    _, sep = layer_metrics(p, s)
    # layer 0: only row 2 disagrees -> sqrt(0.1^2 / 4); layer 1: rows 1 and 3 disagree -> sqrt((0.04 + 0.16) / 4)
    torch.testing.assert_close(sep, torch.tensor([math.sqrt(0.01 / 4), math.sqrt(0.20 / 4)]), atol=1e-6, rtol=0)


def test_projections_broadcast() -> None:
    gen = torch.Generator().manual_seed(4)
    acts = torch.randn(6, 3, 5, generator=gen)
    direction, mean = torch.randn(3, 5, generator=gen), torch.randn(3, 5, generator=gen)
    p = projections(acts, direction, mean)
    assert p.shape == (6, 3)
    torch.testing.assert_close(p[4, 2], (acts[4, 2] - mean[2]) @ direction[2])


def test_scale_matches_formula() -> None:
    s = torch.tensor([0.9, 0.2, 0.5, 0.05, 0.7, -0.3, -0.8, -0.1, -0.6, 0.0])
    p = torch.tensor([2.0, 0.1, 1.4, -0.2, 1.1, -0.4, -2.5, 0.3, -1.0, 5.0])
    pos, neg = s.numpy() > 0, s.numpy() < 0
    pn, sn = p.numpy().astype(float), s.numpy().astype(float)
    expected = abs(
        (np.quantile(pn[pos], 0.9) - np.quantile(pn[neg], 0.1))
        / (np.quantile(sn[pos], 0.9) - np.quantile(sn[neg], 0.1))
    )
    assert scale(p, s) == pytest.approx(expected, rel=1e-6)
    assert scale(-p, s) == pytest.approx(abs((np.quantile(-pn[pos], 0.9) - np.quantile(-pn[neg], 0.1)) / (
        np.quantile(sn[pos], 0.9) - np.quantile(sn[neg], 0.1))), rel=1e-6)


# --- concept scores and split --------------------------------------------------------------------------------------


def test_thresholds_tau_mode() -> None:
    assert thresholds(torch.randn(20), 0.05) == (-0.05, 0.05)


def test_thresholds_quantile_mode_puts_share_on_each_side() -> None:
    gen = torch.Generator().manual_seed(6)
    raw = torch.randn(1001, generator=gen) * 0.1 - 0.3  # all leaning one way
    centred = raw - raw.median()
    low, high = thresholds(centred, 0.05, quantile=0.1)
    assert low < 0 < high
    counts = split_counts(centred, low, high)
    assert counts["positive"] == pytest.approx(100, abs=2)
    assert counts["negative"] == pytest.approx(100, abs=2)
    assert sum(counts.values()) == 1001


def test_thresholds_quantile_band_excluding_zero_raises() -> None:
    with pytest.raises(AuditError) as info:
        thresholds(torch.linspace(0.1, 0.9, 50), 0.05, quantile=0.1)
    assert "\n" not in str(info.value)


def test_split_and_counts() -> None:
    s = torch.tensor([0.2, -0.2, 0.05, -0.05, 0.0, 0.06, -0.3])
    pos, neg, neu = split(s, -0.05, 0.05)
    assert pos.tolist() == [True, False, False, False, False, True, False]
    assert neg.tolist() == [False, True, False, False, False, False, True]
    assert neu.tolist() == [False, False, True, True, True, False, False]
    counts = split_counts(s.tolist(), -0.05, 0.05)
    assert counts == {"positive": 2, "negative": 2, "neutral": 3}
    assert sum(counts.values()) == len(s)


def fake_ids(table):
    return lambda words: [table[w] for w in words if w in table]


def test_concept_tokens_builds_sides_and_scores() -> None:
    words = {"F": ["she", "woman"], "M": ["he", "man"], "B": ["black"], "W": ["white"]}
    tokens = concept_tokens("gender", words, fake_ids({"she": 1, "woman": 2, "he": 3, "man": 4}))
    assert tokens.positive == (1, 2) and tokens.negative == (3, 4)
    assert tokens.ids == [1, 2, 3, 4]
    probs = torch.tensor([[0.1, 0.2, 0.05, 0.05], [0.0, 0.0, 0.3, 0.1]])
    torch.testing.assert_close(tokens.score(probs), torch.tensor([0.2, -0.4]))
    race = concept_tokens("race", words, fake_ids({"black": 7, "white": 8}))
    assert race.positive == (7,) and race.negative == (8,)


def test_concept_tokens_errors() -> None:
    words = {"F": ["she", "x"], "M": ["he", "x"]}
    with pytest.raises(AuditError) as info:
        concept_tokens("gender", words, fake_ids({"she": 1, "he": 2, "x": 9}))
    assert "9" in str(info.value) and "\n" not in str(info.value)
    with pytest.raises(AuditError):
        concept_tokens("gender", words, fake_ids({"she": 1}))  # no male token
    with pytest.raises(AuditError) as info:
        concept_tokens("age", words, fake_ids({}))
    assert "gender" in str(info.value)


def test_concept_score_sign() -> None:
    tokens = ConceptTokens("gender", (0,), (1, 2))
    assert float(tokens.score(torch.tensor([[0.5, 0.1, 0.1]]))[0]) == pytest.approx(0.3)


# --- vectors and caching -------------------------------------------------------------------------------------------


def test_vector_save_load_round_trip(tmp_path) -> None:
    gen = torch.Generator().manual_seed(7)
    direction = F.normalize(torch.randn(16, generator=gen), dim=0)
    mean = torch.randn(16, generator=gen)
    meta = {"model": "tiny", "band": [-0.05, 0.05], "split_counts": {"positive": 3, "negative": 4}, "corr": 0.5}
    vector = SteeringVector("gender_lang", "gender", 5, direction, mean, k=0.123456789, meta=meta)
    path = vector.save(tmp_path / "vectors")
    assert path == tmp_path / "vectors" / "gender_lang.safetensors" and path.exists()
    back = SteeringVector.load(path)
    assert back.name == "gender_lang" and back.concept == "gender"
    assert back.layer == 5 and isinstance(back.layer, int)
    assert back.k == 0.123456789
    assert torch.equal(back.direction, direction) and torch.equal(back.mean, mean)
    assert back.meta == meta
    assert back.cosine(vector) == pytest.approx(1.0, abs=1e-6)
    other = SteeringVector("o", "gender", 5, -direction, mean, 1.0)
    assert vector.cosine(other) == pytest.approx(-1.0, abs=1e-6)


def test_cached_tensors(tmp_path) -> None:
    calls = []

    def compute():
        calls.append(1)
        return {"probs": torch.arange(6.0).reshape(2, 3), "acts": torch.ones(2, 4, 5)}

    key = {"model": {"sha256": "abc"}, "prompts": ["a", "b"], "layers": [0, 1]}
    first = cached_tensors(tmp_path, key, compute)
    second = cached_tensors(tmp_path, dict(reversed(list(key.items()))), compute)
    assert len(calls) == 1
    assert set(second) == {"probs", "acts"}
    for name in first:
        assert torch.equal(first[name], second[name])
    cached_tensors(tmp_path, {**key, "prompts": ["a", "c"]}, compute)
    assert len(calls) == 2
    assert not list(tmp_path.glob("*.partial"))
    assert len(list(tmp_path.glob("*.safetensors"))) == 2
    cached_tensors(None, key, compute)
    assert len(calls) == 3  # no folder: never cached
    assert digest(key) != digest({**key, "layers": [0, 2]})


# --- causal check --------------------------------------------------------------------------------------------------


def test_held_out_rows_exclude_the_ids_that_chose_the_vector(mirror) -> None:
    from llmaudit.chapters.steering_vectors.recipes import RECIPES, rows

    recipe = RECIPES["gender_lang"]
    val = rows(recipe, "val", 40, 0, mirror)
    held_out = rows(recipe, "val", 64, 0, mirror, exclude=val["_id"].tolist())
    assert len(held_out) == 64 and not set(held_out["_id"]) & set(val["_id"])
    assert held_out["instruction"].str.len().gt(0).all()


def test_causal_check_reads_raw_normalised_and_mass_of_the_steered_model(bind, tiny_model, tmp_path) -> None:
    from llmaudit.chapters.steering_vectors.effect import steered_scores

    ids = tiny_model.tokenizer.convert_tokens_to_ids
    tokens = ConceptTokens("gender", tuple(ids(["she", "woman"])), tuple(ids(["he", "man"])))
    frame = pd.DataFrame({"instruction": ["describe the nurse", "who wrote the story about a doctor",
                                          "the engineer said good"], "prefix": ["she is", "it is", "the"]})
    gen = torch.Generator().manual_seed(3)
    vector = SteeringVector("v", "gender", 1, F.normalize(torch.randn(32, generator=gen), dim=0),
                            torch.randn(32, generator=gen), k=4.0)
    prompts = [tiny_model.chat(i, p) for i, p in zip(frame["instruction"], frame["prefix"])]
    tables, ran = {}, {}
    bind(tiny_model, cache=tmp_path)
    for projection in (True, False):  # the additive sweep starts from the states the projection sweep kept
        tiny_model.ledger = Ledger(tiny_model.n_layers)
        tables[projection] = steered_scores(tiny_model, vector, frame, tokens, [-1.0, 0.0, 1.0],
                                            projection=projection)
        ran[projection] = tiny_model.ledger.actual
    padded = lower_positions(tiny_model, prompts, 4096)
    assert ran[True] - ran[False] == padded * (vector.layer + 1)  # no block up to the edit's run again
    for projection, table in tables.items():
        for lam, part in table.groupby(table["lam"].fillna(99.0)):
            edit = None if lam == 99.0 else vector.intervention(lam, projection)
            probs = tiny_model.forward(prompts, tokens.ids, intervention=edit).probs
            plus, minus = probs[:, :2].sum(-1), probs[:, 2:].sum(-1)
            np.testing.assert_allclose(part["raw"], (plus - minus).numpy(), atol=1e-6)
            np.testing.assert_allclose(part["mass"], (plus + minus).numpy(), atol=1e-6)
            np.testing.assert_allclose(part["normalised"], ((plus - minus) / (plus + minus)).numpy(), atol=1e-5)
        assert table["lam"].isna().sum() == len(frame) and len(table) == 4 * len(frame)
