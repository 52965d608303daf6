"""Paper 001 §5.3's mixed-effects model of the pronoun-level shifts and its Tukey HSD comparisons, on a synthetic
frame whose effects are known."""

import numpy as np
import pandas as pd
import pytest

from llmaudit.chapters.framing.mixed import long_shifts, pronoun_model
from llmaudit.errors import AuditError

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


def test_undefined_shifts_are_dropped_and_too_few_attributes_refused():
    frame = synthetic(attributes=3)
    frame.loc[0, "they"] = np.nan  # a relative shift from a zero probability
    assert len(long_shifts(frame)) == 3 * 4 * 3 - 1
    with pytest.raises(AuditError, match="at least 2 attributes"):
        pronoun_model(frame[frame["attribute"] == "a0"])


def test_a_singular_fit_gives_nan_estimates_not_a_failed_chapter(monkeypatch):
    import statsmodels.formula.api as smf

    def singular(*args, **kwargs):
        raise np.linalg.LinAlgError("Singular matrix")

    monkeypatch.setattr(smf, "mixedlm", singular)
    fit = pronoun_model(synthetic(attributes=3))
    assert not fit.converged and list(fit.fixed["term"]) == ["he (intercept)", "she - he", "they - he"]
    assert fit.fixed["estimate"].isna().all() and len(fit.tukey) == 3
