"""Paper 001 §5.3's mixed-effects model of the pronoun-level shifts and its Tukey HSD comparisons, on a synthetic
frame whose effects are known, and not measurable, with its reason, where the shifts cannot support it."""

import numpy as np
import pandas as pd
import pytest

from llmaudit.chapters.framing.mixed import TOO_FEW, long_shifts, pronoun_model
from llmaudit.chapters.framing.stimuli import prompts
from llmaudit.chapters.framing.tables import pronoun_levels
from llmaudit.footnotes import footnoted
from llmaudit.formats import MISSING

EFFECTS = {"he": -0.10, "she": 0.01, "they": 0.15}  # the paper's ordering: they > she > he (+0.11, +0.25 over he)


def synthetic(attributes: int = 40, pairs: int = 4, seed: int = 0) -> pd.DataFrame:
    """Pronoun-level shifts (attribute, task, factor, held_at, he, she, they) = effect + attribute intercept + noise."""
    rng = np.random.default_rng(seed)
    rows = []
    for a in range(attributes):
        intercept = rng.normal(0, 0.2)
        for k in range(pairs):
            rows.append({"attribute": f"a{a}", "task": f"t{k}", "factor": "gender", "held_at": True,
                         **{f: e + intercept + rng.normal(0, 0.02) for f, e in EFFECTS.items()}})
    return pd.DataFrame(rows)


def test_balanced_fit_recovers_the_known_effects():
    frame = synthetic()
    fit = pronoun_model(frame)
    fixed = fit.fixed.set_index("term")
    # balanced design: the fixed effects are the differences of the pronouns' means exactly (GLS = OLS here)
    means = long_shifts(frame).groupby("pronoun")["shift"].mean()
    assert fixed.loc["she - he", "estimate"] == pytest.approx(means["she"] - means["he"], abs=1e-6)
    assert fixed.loc["they - he", "estimate"] == pytest.approx(means["they"] - means["he"], abs=1e-6)
    assert fixed.loc["she - he", "estimate"] == pytest.approx(0.11, abs=0.01)
    assert fixed.loc["they - he", "estimate"] == pytest.approx(0.25, abs=0.01)
    # the random intercept takes the attributes' spread (sd 0.2), so the differences are tight
    assert fixed.loc["they - he", "se"] < 0.01 and fixed.loc["they - he", "p"] < 1e-6 and fit.converged
    tukey = fit.tukey.set_index(["a", "b"])
    assert list(tukey.index) == [("he", "she"), ("he", "they"), ("she", "they")]
    assert tukey.loc[("she", "they"), "difference"] == pytest.approx(means["they"] - means["she"])
    assert (tukey["lo"] < tukey["difference"]).all() and (tukey["difference"] < tukey["hi"]).all()


def test_no_effect_is_not_significant():
    frame = synthetic().assign(she=lambda f: f["he"] + np.random.default_rng(1).normal(0, 0.02, len(f)))
    fixed = pronoun_model(frame).fixed.set_index("term")
    assert fixed.loc["she - he", "lo"] < 0 < fixed.loc["she - he", "hi"]


def test_undefined_shifts_are_dropped():
    frame = synthetic(attributes=3)
    frame.loc[0, "they"] = np.nan  # a relative shift from a zero probability
    assert len(long_shifts(frame)) == 3 * 4 * 3 - 1


@pytest.mark.parametrize("data", ["one attribute", "no shift of they"])
def test_shifts_that_cannot_support_the_model_make_it_not_measurable_with_the_reason(data):
    """One attribute (no random intercept to fit), or a pronoun with no shift anywhere (its probability 0 under every
    - prompt, as from a server whose window holds no pronoun): the chapter goes on, the model's tables and recorded
    differences empty, each saying why."""
    frame = synthetic(attributes=3)
    frame = frame[frame["attribute"] == "a0"] if data == "one attribute" else frame.assign(they=np.nan)
    fit = pronoun_model(frame)
    assert fit.why == TOO_FEW and fit.status() == TOO_FEW and not fit.converged
    for table in (fit.fixed, fit.tukey):
        shown, marks = footnoted(table)
        assert table.select_dtypes("number").isna().all().all() and marks.text() == f"\n¹ {MISSING} {TOO_FEW}."
    assert list(fit.fixed["term"]) == ["he (intercept)", "she - he", "they - he"] and len(fit.tukey) == 3


def test_a_model_that_never_offers_she_or_they_leaves_the_pronoun_model_not_measurable():
    """Every cell's whole pronoun mass on he (a server whose log-probability window held no other pronoun): she and
    they have no relative shift anywhere, and the chapter records the model's differences empty with its reason."""
    cells = pd.DataFrame([{"attribute": p.attribute, "task": p.task, "gender": p.gender, "instr": p.instr,
                           "he": 1.0, "she": 0.0, "they": 0.0} for a in ("sideburns", "a beard") for p in prompts(a)])
    levels, fit = pronoun_levels(cells, "plain")
    assert fit.why == TOO_FEW
    results = levels.results
    assert list(results.index) == ["plain.pronoun_model.she_minus_he", "plain.pronoun_model.they_minus_he"]
    assert results["value"].isna().all() and (results["note"] == TOO_FEW).all()


def test_a_singular_fit_gives_nan_estimates_not_a_failed_chapter(monkeypatch):
    import statsmodels.formula.api as smf

    def singular(*args, **kwargs):
        raise np.linalg.LinAlgError("Singular matrix")

    monkeypatch.setattr(smf, "mixedlm", singular)
    fit = pronoun_model(synthetic(attributes=3))
    assert not fit.converged and list(fit.fixed["term"]) == ["he (intercept)", "she - he", "they - he"]
    assert fit.fixed["estimate"].isna().all() and len(fit.tukey) == 3


# Relative shifts of the CI profile's three attributes (rounded to 3 digits), whose attributes' variance is at its
# boundary: statsmodels' default optimisers stop on a singular matrix here, and gave an intercept of exactly 0 when
# the probabilities behind them changed in their sixth digit.
BOUNDARY = {
    "he": [0.231, -0.496, -0.273, -0.053, -0.185, 0.42, 0.048, 0.101, -0.047, -0.081, 0.146, -0.566, -0.143, -0.036,
           -0.126, -0.576, -0.341, -0.05, -0.643, 0.035, 0.087, -0.651, -0.315, 0.354],
    "she": [0.059, 0.948, -0.18, -0.988, -0.995, 0.034, 1.597, -0.014, -0.99, -0.995, 0.069, 2.545, 0.74, -0.99,
            -0.996, 0.922, 0.492, -0.372, 0.672, 0.684, -0.361, 1.99, 0.182, -0.42],
    "they": [-0.22, -0.472, 0.296, 171.978, 180.578, -0.209, -0.487, -0.009, 195.982, 170.282, -0.27, -0.436,
             -0.188, 161.654, 193.019, -0.439, -0.219, 0.915, -0.441, -0.21, 0.524, -0.463, 0.165, 0.678],
}
UNITS = [unit for unit, n in [("sideburns", 5), ("delicate wrists", 5), ("a sprained ankle", 5), ("sideburns", 3),
                              ("delicate wrists", 3), ("a sprained ankle", 3)] for _ in range(n)]


def test_a_fit_at_the_boundary_gives_the_least_squares_effects_whatever_the_noise():
    import statsmodels.formula.api as smf

    long = pd.DataFrame([{"unit": u, "pronoun": p, "shift": v} for p, values in BOUNDARY.items()
                         for u, v in zip(UNITS, values)])
    with pytest.raises(np.linalg.LinAlgError):  # the default optimisers alone
        smf.mixedlm("shift ~ C(pronoun, Treatment('he'))", long, groups=long["unit"]).fit(reml=True)
    levels = pd.DataFrame({"attribute": UNITS, "task": range(24), **BOUNDARY})
    means = {p: np.mean(v) for p, v in BOUNDARY.items()}
    for noise in (0.0, 1e-7):  # probabilities differing in their sixth digit: the same fit
        fit = pronoun_model(levels.assign(they=levels["they"] * (1 + noise)))
        fixed = fit.fixed.set_index("term")["estimate"]
        assert fixed["he (intercept)"] == pytest.approx(means["he"], abs=1e-3)
        assert fixed["she - he"] == pytest.approx(means["she"] - means["he"], abs=1e-3)
        assert fixed["they - he"] == pytest.approx(means["they"] - means["he"], abs=1e-2)
        assert not fit.converged  # on the boundary: reported as such
