"""Figures of the framing chapter: pronoun distributions per condition, the Probability of Pronoun Shift per attribute
(paper 001 Figure 1), framing effects per attribute (Figure 2), token probability against proportion of choices and
sensitivity under both metrics (Figure 4), prompt projections and steering."""

from __future__ import annotations

import altair as alt
import pandas as pd

TAG = alt.Color("tag:N", title="stereotype", scale=alt.Scale(domain=["masculine", "feminine", "neutral"]))


def _condition(frame: pd.DataFrame) -> pd.DataFrame:
    """The frame with a readable condition label (Gender± Instr±)."""
    label = ("Gender" + frame["gender"].map({True: "+", False: "−"}) + " Instr"
             + frame["instr"].map({True: "+", False: "−"}))
    return frame.assign(condition=label)


def distributions(frame: pd.DataFrame) -> alt.FacetChart:
    """P(she) per attribute (strip) for every condition, one panel per task (columns task, gender, instr, tag,
    she)."""
    return alt.Chart(_condition(frame)).mark_tick(thickness=2, size=14).encode(
        x=alt.X("she:Q", title="P(she) among he / she / they", scale=alt.Scale(domain=[0, 1])),
        y=alt.Y("condition:N", title=None), color=TAG, tooltip=["attribute", "she"],
    ).properties(width=380, height=alt.Step(18)).facet(row=alt.Row("task:N", title=None))


def shift_distribution(frame: pd.DataFrame) -> alt.LayerChart:
    """Paper 001 Figure 1: each attribute's Probability of Pronoun Shift per prompt form (points), the mean (black
    tick) and its 95% interval over attributes (bar) (`tables.shift_distribution`'s columns)."""
    base = alt.Chart(frame).encode(y=alt.Y("form:N", title=None))
    points = base.mark_circle(size=40, opacity=0.5).encode(
        x=alt.X("pronoun_shift:Q", title="Probability of Pronoun Shift", scale=alt.Scale(domain=[0, 1])),
        tooltip=["attribute", "pronoun_shift"])
    summary = base.transform_aggregate(mean="mean(mean)", lo="mean(lo)", hi="mean(hi)", groupby=["form"])
    bars = summary.mark_rule(color="black").encode(x="lo:Q", x2="hi:Q")
    ticks = summary.mark_tick(thickness=3, size=18, color="black").encode(x="mean:Q")
    return (points + bars + ticks).properties(width=420, height=alt.Step(24))


def effects(scores: pd.DataFrame) -> alt.Chart:
    """GenEffect and InstrEffect per attribute, one strip per task and effect (columns attribute, task,
    gen_effect, instr_effect)."""
    long = scores.melt(["attribute", "task"], ["gen_effect", "instr_effect"], "effect", "apd").dropna()
    return alt.Chart(long).mark_circle(size=40, opacity=0.6).encode(
        x=alt.X("apd:Q", title="APD between framings", scale=alt.Scale(domain=[0, 1])),
        y=alt.Y("task:N", title=None), yOffset="effect:N", color=alt.Color("effect:N", title=None),
        tooltip=["attribute", "task", "effect", "apd"],
    ).properties(width=420, height=alt.Step(14))


def token_vs_choice(paired: pd.DataFrame) -> alt.Chart:
    """P(she) from token probabilities against the share of sampled answers naming she, per kept cell."""
    return alt.Chart(paired).mark_circle(size=30, opacity=0.6).encode(
        x=alt.X("she_token:Q", title="P(she), token probability", scale=alt.Scale(domain=[0, 1])),
        y=alt.Y("she_choice:Q", title="share of answers with she", scale=alt.Scale(domain=[0, 1])),
        color=alt.Color("task:N", title=None), tooltip=["attribute", "task", "gender", "instr"],
    ).properties(width=300, height=300)


def metric_sensitivity(table: pd.DataFrame) -> alt.Chart:
    """Per task, each attribute's sensitivity under the two metrics (paper 001 Figure 4; columns attribute, task,
    metric, sensitivity): points per attribute, a tick at each metric's mean."""
    base = alt.Chart(table).encode(
        x=alt.X("sensitivity:Q", title="sensitivity (mean APD between framings)", scale=alt.Scale(domain=[0, 1])),
        y=alt.Y("task:N", title=None), yOffset="metric:N", color=alt.Color("metric:N", title=None))
    points = base.mark_circle(size=40, opacity=0.5).encode(tooltip=["attribute", "task", "metric", "sensitivity"])
    return (points + base.mark_tick(thickness=3, size=16, color="black").encode(x="mean(sensitivity):Q")).properties(
        width=420, height=alt.Step(16))


def projection_by_condition(frame: pd.DataFrame) -> alt.FacetChart:
    """Prompt projections on the gender vector per condition, coloured by stereotype (columns task, gender,
    instr, tag, projection)."""
    return alt.Chart(_condition(frame)).mark_tick(thickness=2, size=14).encode(
        x=alt.X("projection:Q", title="projection on the gender vector (− male, + female)"),
        y=alt.Y("condition:N", title=None), color=TAG, tooltip=["attribute", "projection"],
    ).properties(width=380, height=alt.Step(18)).facet(row=alt.Row("task:N", title=None))


def steering(frame: pd.DataFrame) -> alt.FacetChart:
    """Mean P(she) and P(he) against lambda per task and condition (columns task, gender, instr, lam, he, she)."""
    long = _condition(frame).melt(["task", "condition", "lam"], ["he", "she", "they"], "pronoun", "share")
    return alt.Chart(long).mark_line(point=True).encode(
        x=alt.X("lam:Q", title="λ (− male, + female)"), y=alt.Y("mean(share):Q", title="share"),
        color=alt.Color("pronoun:N"), strokeDash=alt.StrokeDash("condition:N"),
    ).properties(width=220, height=150).facet(column=alt.Column("task:N", title=None))
