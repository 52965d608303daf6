"""Paper 001 §5.3's statistics of the pronoun-level shifts: a linear mixed-effects model predicting the shift from
the pronoun category (fixed effects, *he* the reference) with a random intercept per unit (the paper's unit is the
model; one audited model's unit is the attribute), and the follow-up Tukey HSD comparisons of the pronouns."""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from itertools import combinations

import numpy as np
import pandas as pd
import statsmodels.formula.api as smf
from statsmodels.regression.mixed_linear_model import MixedLM, MixedLMResults
from statsmodels.stats.multicomp import pairwise_tukeyhsd
from statsmodels.tools.sm_exceptions import ConvergenceWarning

from llmaudit.chapters.framing.pronouns import FAMILIES
from llmaudit.footnotes import explain

REFERENCE = "he"  # the paper's baseline: "compared to masculine pronouns"
TOO_FEW = ("not measurable: the pronoun model needs shifts of he, she and they from at least 2 attributes (raise "
           "per_tag in the params file)")  # its estimates' note where the shifts cannot support the fit
TERMS = {"Intercept": f"{REFERENCE} (intercept)", **{f"C(pronoun, Treatment('{REFERENCE}'))[T.{f}]":
                                                     f"{f} - {REFERENCE}" for f in FAMILIES if f != REFERENCE}}


@dataclass(frozen=True)
class PronounModel:
    """The mixed model's fixed effects (term, estimate, se, p, lo, hi; 'she' and 'they' are differences from 'he'),
    whether its fit converged, the Tukey HSD table (a, b, difference b - a, p, lo, hi) and why nothing was fitted
    (None: it was; else both tables' numbers are missing, explained by it)."""

    fixed: pd.DataFrame
    converged: bool
    tukey: pd.DataFrame
    why: str | None = None

    def status(self) -> str:
        """One sentence on the fit: converged, not converged, or why it was not measurable."""
        return self.why or ("fit converged" if self.converged
                            else "the fit did not converge: read the estimates with care")


def long_shifts(levels: pd.DataFrame, unit: str = "attribute") -> pd.DataFrame:
    """`metrics.pronoun_level_shift` output as one row per (matched pair, pronoun): columns unit, pronoun, shift;
    undefined shifts (a pronoun one prompt of the pair does not offer, a relative shift from 0) are left out."""
    long = levels.melt(id_vars=[c for c in levels.columns if c not in FAMILIES], value_vars=list(FAMILIES),
                       var_name="pronoun", value_name="shift")
    return long.dropna(subset=["shift"]).rename(columns={unit: "unit"})[["unit", "pronoun", "shift"]]


def pronoun_model(levels: pd.DataFrame, *, unit: str = "attribute", alpha: float = 0.05) -> PronounModel:
    """Fit shift ~ pronoun with a random intercept per `unit` (REML) on the pronoun-level shifts, and compare every
    pair of pronouns by Tukey HSD, as paper 001 §5.3 does across models; not measurable (`TOO_FEW`) where the shifts
    lack a pronoun or come from fewer than 2 attributes (a random intercept per attribute needs two)."""
    data = long_shifts(levels, unit)
    if data["unit"].nunique() < 2 or set(data["pronoun"]) != set(FAMILIES):
        pairs = list(combinations(sorted(FAMILIES), 2))
        tukey = pd.DataFrame({"a": [a for a, _ in pairs], "b": [b for _, b in pairs],
                              **{column: np.nan for column in ("difference", "p", "lo", "hi")}})
        return PronounModel(explain(_unfitted(), TOO_FEW), False, explain(tukey, TOO_FEW), TOO_FEW)
    fixed, converged = _fixed_effects(data, alpha)
    hsd = pairwise_tukeyhsd(data["shift"], data["pronoun"], alpha=alpha)
    pairs = list(combinations(hsd.groupsunique, 2))  # statsmodels' order of the comparisons
    tukey = pd.DataFrame({"a": [a for a, _ in pairs], "b": [b for _, b in pairs], "difference": hsd.meandiffs,
                          "p": hsd.pvalues, "lo": hsd.confint[:, 0], "hi": hsd.confint[:, 1]})
    return PronounModel(fixed, converged, tukey)


def _fixed_effects(data: pd.DataFrame, alpha: float) -> tuple[pd.DataFrame, bool]:
    """The REML fit's fixed effects (term, estimate, se, p, lo, hi) and whether it converged; a fit whose matrices
    are singular (few attributes, shifts that do not vary) gives NaN rows and False, not a failed chapter."""
    try:
        fit, converged = _reml(smf.mixedlm(f"shift ~ C(pronoun, Treatment('{REFERENCE}'))", data, groups=data["unit"]))
    except np.linalg.LinAlgError:
        return _unfitted(), False
    terms, bounds = fit.fe_params.index, fit.conf_int(alpha)
    fixed = pd.DataFrame({"estimate": fit.fe_params, "se": fit.bse_fe, "p": fit.pvalues[terms],
                          "lo": bounds.loc[terms, 0], "hi": bounds.loc[terms, 1]})
    return fixed.rename(index=TERMS).rename_axis("term").reset_index(), converged


def _unfitted() -> pd.DataFrame:
    """The fixed-effects table of a model not fitted: every term, its numbers NaN."""
    return pd.DataFrame(np.nan, index=pd.Index(list(TERMS.values()), name="term"),
                        columns=["estimate", "se", "p", "lo", "hi"]).reset_index()


def _reml(model: MixedLM) -> tuple[MixedLMResults, bool]:
    """The REML fit by statsmodels' gradient optimisers and whether it converged cleanly; where they stop on a
    singular matrix or warn, again by Powell's derivative-free search. With the attributes' variance at its
    boundary (0) the gradient steps go astray with float noise: a singular matrix, or an intercept of exactly 0,
    for probabilities that differ in their sixth digit; Powell's search finds the boundary fit (the fixed effects
    then least squares') either way. A fit that warned is reported as not converged."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        try:
            fit = model.fit(reml=True)
            if fit.converged and not any(issubclass(w.category, ConvergenceWarning) for w in caught):
                return fit, True
        except np.linalg.LinAlgError:
            pass
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        fit = model.fit(reml=True, method="powell")
    return fit, bool(fit.converged) and not any(issubclass(w.category, ConvergenceWarning) for w in caught)
