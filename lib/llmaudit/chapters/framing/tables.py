"""The framing chapter's tables from its scored prompts and sampled answers: the attributes it samples, the framing
effects and Probability of Pronoun Shift per prompt form, the cells the pronoun rule excludes, token probability
against proportion of choices, the two metrics' sensitivity, the 'they' check and the pronoun shares under
steering, each with the results the chapter records about it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd

from llmaudit.chapters.decision_tasks.base import sample_ids
from llmaudit.chapters.framing.metrics import (
    KEYS,
    answer_cases,
    effects,
    metric_sensitivity,
    pronoun_level_shift,
    pronoun_shift,
    pronoun_shift_cases,
)
from llmaudit.chapters.framing.mixed import PronounModel, pronoun_model
from llmaudit.chapters.framing.pronouns import FAMILIES, deferred_gender, exclusion_table
from llmaudit.chapters.framing.stimuli import ATTRIBUTES, Attribute
from llmaudit.findings import Findings, results_frame
from llmaudit.footnotes import explain
from llmaudit.models.sampling.release import Decoding
from llmaudit.stats import t_interval

TAGS = ("masculine", "feminine", "neutral")
EXCLUDED = "{form}.excluded_share"  # the exclusion rule's test in the case file (its form filled in)
METRICS = {"token probability": "token", "proportion of choices": "choice"}  # sensitivity metric -> result key
NONE_KEPT = ("The 60% rule excludes every (task, condition) cell, so no sampled answer's pronoun can be compared "
             "with the token probability.")  # what the choice-based tables, figures and results say when so
NO_PAIR = "no (attribute, task) pair has both cells of an effect kept by the 60% rule"
FLAT = "not defined: the token probability or the share is the same in every kept cell"
NO_INSTR_PAIR = "the task has no Instr- prompt (paper 001, Table 3), so it has no InstrEffect"
NOT_OFFERED = ("one prompt of the pair does not offer this pronoun (paper 001, Table 3), or its probability under the "
               "factor's - prompt is 0, so there is no shift to read")
NO_THEY = "no sampled answer in this condition was counted as they"


def sample_attributes(per_tag: int | None, seed: int) -> list[Attribute]:
    """`per_tag` attributes of each stereotype tag (None: all), in tag order."""
    by_tag = {tag: [a for a in ATTRIBUTES if a.tag == tag] for tag in TAGS}
    return [found[i] for found in by_tag.values()
            for i in sample_ids(range(len(found)), min(per_tag or len(found), len(found)), seed)]


def condition_means(frame: pd.DataFrame, tag: Mapping[str, str]) -> pd.DataFrame:
    """Mean he / she / they share per task and condition, with the attribute's stereotype tag (`tag`)."""
    frame = frame.assign(tag=frame["attribute"].map(tag))
    return frame.groupby(["task", "gender", "instr", "tag"], sort=False)[list(FAMILIES)].mean()


def framing_effects(tidy: Mapping[str, pd.DataFrame], prompts: Mapping[str, Sequence[str]],
                    probability: Mapping[str, pd.DataFrame]) -> Findings:
    """Per prompt form (`tidy`: its cell means): each attribute's GenEffect and InstrEffect (`estimates`), their
    means per task (`table`), recorded with the form's Probability of Pronoun Shift; the cases are each form's
    pronoun shifts (`probability`: its scored samples, `prompts`: their texts)."""
    scores = {form: effects(frame) for form, frame in tidy.items()}
    found = []
    for form, frame in scores.items():
        for column in ("gen_effect", "instr_effect"):
            found += [{"name": f"{form}.{task}.{column}", "value": value,
                       "note": "mean APD over attributes (token probability)"}
                      for task, value in frame.groupby("task")[column].mean().dropna().items()]
        shifts = pronoun_shift(tidy[form])["pronoun_shift"]
        shift = t_interval(shifts)
        found.append({"name": f"{form}.pronoun_shift", "value": shift.value, "lo": shift.lo, "hi": shift.hi,
                      "note": "Probability of Pronoun Shift, mean over attributes (95% t-interval)",
                      "n": int(shifts.notna().sum())})
    cases = [pronoun_shift_cases(frame.assign(prompt=prompts[form]), f"{form}.pronoun_shift")
             for form, frame in probability.items()]
    table = pd.concat({form: frame.groupby("task")[["gen_effect", "instr_effect"]].mean()
                       for form, frame in scores.items()}, axis=1)
    why = {(form, "instr_effect"): NO_INSTR_PAIR for form in scores}
    return Findings(explain(table, why), results_frame(found), pd.concat(scores, names=["form"]), cases)


def decoding_used(decoding: Decoding, design: str) -> Findings:
    """The sampler's settings as results (top-k empty for the whole vocabulary), each noted with the run's design."""
    values = {"temperature": decoding.temperature, "top_k": decoding.top_k, "top_p": decoding.top_p}
    found = [{"name": f"decoding.{setting}", "value": value,
              "note": design if value is not None else f"no top-k cut: the whole vocabulary; {design}"}
             for setting, value in values.items()]
    return Findings(pd.Series(values, name=decoding.describe()).to_frame(), results_frame(found))


def exclusions(answers: pd.DataFrame, form: str, design: str) -> Findings:
    """Per (task, condition) cell, its sampled answers (prompts in `form`) and whether the pronoun rule excludes it;
    the results are the excluded cells, their share and the answers with a pronoun in the kept cells, noted with the
    run's `design`, the cases each answer."""
    excluded = exclusion_table(answers)
    kept = excluded[~excluded["excluded"]]
    test = EXCLUDED.format(form=form)
    found = [{"name": f"{form}.excluded_cells", "value": int(excluded["excluded"].sum()),
              "note": f"of {len(excluded)} (task, condition) cells, > 60% answers without a pronoun; {design}"},
             {"name": test, "value": float(excluded["excluded"].mean()),
              "note": f"share of (task, condition) cells; {design}"},
             {"name": f"{form}.valid_answers", "value": int((kept["n"] - kept["n_invalid"]).sum()),
              "note": f"sampled answers with a pronoun in the kept cells; {design}"}]
    return Findings(excluded, results_frame(found), cases=[answer_cases(answers, excluded, test)])


def token_vs_choice(tokens: pd.DataFrame, choices: pd.DataFrame) -> Findings:
    """The kept cells' token probabilities beside their proportions of choices (columns '{pronoun}_token' and
    '{pronoun}_choice'), recorded as each pronoun's Pearson r."""
    paired = tokens.merge(choices, on=KEYS, suffixes=("_token", "_choice"))
    found = []
    for family in FAMILIES:
        r = paired[f"{family}_token"].corr(paired[f"{family}_choice"])
        why = ("Pearson r over kept cells (attribute x condition)" if pd.notna(r)
               else NONE_KEPT if paired.empty else FLAT)
        found.append({"name": f"token_vs_choice.{family}", "value": r, "note": why})
    return Findings(paired, results_frame(found))


def agreement_line(agreement: Findings) -> str:
    """The sentence under the token-versus-choice table: the kept cells and each pronoun's r, or why there is none."""
    if agreement.table.empty:
        return NONE_KEPT
    r = agreement.results["value"]
    each = ", ".join(f"{family} {value:+.2f}" if pd.notna(value) else f"{family} not defined (a constant reading)"
                     for family, value in zip(FAMILIES, r))
    return (f"{len(agreement.table)} attribute x condition cells kept; correlation of token probability with "
            f"proportion of choices: {each}")


def sensitivities(tokens: pd.DataFrame, choices: pd.DataFrame, form: str) -> Findings:
    """Each (attribute, task) pair's framing sensitivity under both metrics (prompts in `form`), recorded as each
    metric's mean (NaN where no pair has both cells of an effect kept)."""
    by_metric = metric_sensitivity(tokens, choices)
    found = []
    for metric, key in METRICS.items():
        values = by_metric.loc[by_metric["metric"] == metric, "sensitivity"]
        found.append({"name": f"{form}.sensitivity.{key}", "value": values.mean() if len(values) else float("nan"),
                      "note": f"{metric}: mean over (attribute, task) pairs with both cells of an effect kept"
                              if len(values) else f"not measured: {NO_PAIR}"})
    return Findings(by_metric, results_frame(found))


def deferred(answers: pd.DataFrame, form: str) -> Findings:
    """Per condition, the answers (prompts in `form`) counted as 'they' that name a gender later; recorded over all
    conditions."""
    table = deferred_gender(answers)
    overall = table.set_index("condition").loc["all"]
    found = [{"name": f"{form}.they_names_gender", "value": overall["rate"],
              "note": f"of {int(overall['n_they'])} answers counted as they"}]
    return Findings(explain(table, NO_THEY), results_frame(found))


def steering_span(steered: pd.DataFrame, lambdas: Sequence[float]) -> Findings:
    """Mean pronoun shares per task and lambda; recorded per task, P(she) at the largest lambda minus the smallest."""
    means = steered.groupby(["task", "lam"])[list(FAMILIES)].mean()
    span = means.xs(max(lambdas), level="lam")["she"] - means.xs(min(lambdas), level="lam")["she"]
    note = f"mean P(she) at lambda={max(lambdas):g} minus at {min(lambdas):g}"
    found = [{"name": f"steering.{task}.she_span", "value": value, "note": note} for task, value in span.items()]
    return Findings(means, results_frame(found))


def shift_distribution(tidy: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """Paper 001 Figure 1's data: each attribute's Probability of Pronoun Shift per prompt form (columns form,
    attribute, pronoun_shift) with the form's mean and 95% t-interval over attributes (mean, lo, hi)."""
    parts = []
    for form, frame in tidy.items():
        shifts = pronoun_shift(frame)
        summary = t_interval(shifts["pronoun_shift"])
        parts.append(shifts.assign(form=form, mean=summary.value, lo=summary.lo, hi=summary.hi))
    return pd.concat(parts, ignore_index=True)


def pronoun_levels(tokens: pd.DataFrame, form: str) -> tuple[Findings, PronounModel]:
    """Paper 001 §5.3 on the cell means of prompts in `form`: the relative pronoun-level shifts per matched pair
    (`estimates`), their mean with a 95% t-interval over attributes per pronoun beside the absolute reading (`table`),
    and the mixed model of the relative shifts with its Tukey HSD comparisons; the results are the model's she - he
    and they - he differences with their intervals (missing, with the model's reason, where it was not fitted)."""
    relative, absolute = pronoun_level_shift(tokens), pronoun_level_shift(tokens, relative=False)
    rows = []
    for reading, levels in (("relative (paper)", relative), ("absolute", absolute)):
        per_attribute = levels.groupby("attribute")[list(FAMILIES)].mean()
        for family in FAMILIES:
            found = t_interval(per_attribute[family].dropna())
            rows.append({"reading": reading, "pronoun": family, "mean": found.value, "lo": found.lo, "hi": found.hi})
    model = pronoun_model(relative)
    fixed = model.fixed.set_index("term")
    results = [{"name": f"{form}.pronoun_model.{family}_minus_he", "value": fixed.loc[f"{family} - he", "estimate"],
                "lo": fixed.loc[f"{family} - he", "lo"], "hi": fixed.loc[f"{family} - he", "hi"],
                "note": model.why or ("mixed model of the relative shifts, random intercept per attribute"
                                      + ("" if model.converged else " (fit did not converge)")),
                "n": int(relative["attribute"].nunique())}
               for family in ("she", "they")]
    return Findings(pd.DataFrame(rows), results_frame(results), explain(relative, NOT_OFFERED)), model
