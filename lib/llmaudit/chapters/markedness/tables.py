"""The markedness chapter's tables from its classified sentences (one row per sentence and demonstration run:
dataset, run, regime, group, gold, pred, projection): accuracy, the classifier's gates, the FPR gaps per group,
the agreement with the unmarked sentence and the projection on the race vector, each with the results the chapter
records about it."""

from __future__ import annotations

import pandas as pd

from llmaudit.chapters.markedness.evaluate import agreement_with_unmarked
from llmaudit.chapters.markedness.metrics import (
    GROUPS,
    false_positive_rates,
    fpr_gap_cases,
    fpr_gaps,
    gap_span,
    summarise_gaps,
)
from llmaudit.chapters.markedness.prompts import UNMARKED
from llmaudit.chapters.markedness.spec import ACCURACY_OVER_CHANCE, MIN_LABEL_SHARE, fpr_gap
from llmaudit.findings import Findings, results_frame
from llmaudit.spec import result

NINE_SHOT = "9-shot"
RATED = ["group", "gold", "pred", "run"]  # the columns false_positive_rates reads


def accuracy(predictions: pd.DataFrame) -> Findings:
    """The share of sentences classified correctly per probe set (rows) and regime (columns)."""
    table = (predictions.assign(correct=predictions["gold"] == predictions["pred"])
             .groupby(["dataset", "regime"])["correct"].mean().unstack())
    found = [{"name": f"{name}.accuracy.{regime}", "value": value, "note": "share of sentences classified correctly"}
             for (name, regime), value in table.stack().items()]
    return Findings(table, results_frame(found))


def label_shares(predictions: pd.DataFrame, correct: pd.DataFrame) -> Findings:
    """The share of each predicted label per probe set and regime; the results are the 9-shot classifier's gates,
    its accuracy over guessing (from `correct`, the accuracy table) and its smallest share among the gold labels."""
    shares = predictions.groupby(["dataset", "regime"])["pred"].value_counts(normalize=True).unstack(fill_value=0)
    found = []
    for name, table in predictions[predictions["regime"] == NINE_SHOT].groupby("dataset"):
        used = sorted(table["gold"].unique())
        found += [{"name": result(name, ACCURACY_OVER_CHANCE), "value": correct.loc[name, NINE_SHOT] - 1 / 3,
                   "note": "9-shot accuracy minus 1/3 (guessing among the three labels)"},
                  {"name": result(name, MIN_LABEL_SHARE),  # 0 where no 9-shot answer named a label at all
                   "value": float(shares.reindex([(name, NINE_SHOT)], fill_value=0).iloc[0]
                                  .reindex(used, fill_value=0).min()),
                   "note": f"smallest share of 9-shot predictions among the gold labels ({', '.join(used)})"}]
    return Findings(shares, results_frame(found))


def clipping(row: pd.Series) -> str:
    """What a summary row's clipped interval covers, in words ('' where its t-interval needed no clipping): the
    range it was clipped to and, where it spans all of it, that it says nothing about the gap."""
    if not row["clipped"]:
        return ""
    runs, bound = int(row["n_runs"]), row["bound"]
    said = (f"the 95% t-interval over {runs} seeds ({runs - 1} degree{'s' if runs > 2 else ''} of freedom) runs past "
            f"the -{100 * bound:.1f} to +{100 * bound:.1f} pp a gap can take (one group's FPR 1, every other's 0) "
            "and is clipped to it")
    if row["lo"] <= -bound and row["hi"] >= bound:
        said += ("; it spans that whole range, so it says nothing about the gap (the paper's design has five seeds, "
                 "§3.2)")
    return said + "; "


def gaps(predictions: pd.DataFrame, seeds: int, design: str) -> Findings:
    """Per probe set, regime and group, the FPR gaps with their t-intervals over runs; the results and cases are
    the White sentences' 9-shot gaps (over `seeds` demonstration seeds) and each set's span of gaps over groups,
    noted with the run's protocol (`design`, `spec.design_note`)."""
    marked = predictions[predictions["group"].isin(GROUPS)]
    summaries, found, cases = [], [], []
    for (name, regime), table in marked.groupby(["dataset", "regime"]):
        if table["pred"].isna().all():  # no answer named a label: no rates at all, and no gaps
            continue
        summary = summarise_gaps(fpr_gaps(false_positive_rates(table[RATED])))
        summaries.append(summary.assign(dataset=name, regime=regime))
        if regime != NINE_SHOT:
            continue
        for kind, row in summary[summary["group"] == "white"].set_index("kind").iterrows():
            runs = int(row["n_runs"])  # seeds in which every group had an FPR of this kind (none: no gap at all)
            found.append({"name": fpr_gap(name, kind), "value": row["mean"], "lo": row["lo"], "hi": row["hi"],
                          "note": f"9-shot, {runs} of {seeds} seeds with every group's FPR; "
                                  f"{clipping(row)}{design}",
                          "n": runs or None})
            cases.append(fpr_gap_cases(table, fpr_gap(name, kind), kind, "white"))
        found += [{"name": f"{name}.{kind}_gap_span", "value": span, "note": f"9-shot; {design}"}
                  for kind, span in gap_span(summary).items()]
    table = (pd.concat(summaries, ignore_index=True) if summaries
             else pd.DataFrame(columns=["group", "kind", "mean", "lo", "hi", "n_runs", "bound", "clipped",
                                   "dataset", "regime"]))
    return Findings(table, results_frame(found), cases=cases)


def agreement(slotted: pd.DataFrame) -> Findings:
    """Per probe set with slotted templates and group, the share of 9-shot predictions equal to the unmarked
    sentence's; the results are White's share and the mean share of the other groups."""
    agree, found = [], []
    for name, table in slotted.groupby("dataset"):
        shares = agreement_with_unmarked(table[table["regime"] == NINE_SHOT], UNMARKED)
        mean = shares.groupby("group", as_index=False)["agrees"].mean().assign(dataset=name)
        agree.append(mean)
        found += [{"name": f"{name}.white_agreement_with_unmarked",
                   "value": float(mean.loc[mean["group"] == "white", "agrees"].iloc[0]),
                   "note": "9-shot, share of templates"},
                  {"name": f"{name}.others_agreement_with_unmarked",
                   "value": float(mean.loc[mean["group"] != "white", "agrees"].mean()),
                   "note": "9-shot, mean over the other groups"}]
    return Findings(pd.concat(agree, ignore_index=True), results_frame(found))


def projection_shift(zero: pd.DataFrame, vector: str) -> Findings:
    """Each group's mean projection on the race vector (`vector`) minus the unmarked sentences'; the results are
    White's and African American's."""
    centre = zero.groupby("group")["projection"].mean()
    shift = centre - centre[UNMARKED]
    found = [{"name": f"projection.{group}_minus_unmarked", "value": shift[group], "note": vector}
             for group in ("white", "african_american")]
    return Findings(shift.rename("mean projection minus unmarked").to_frame(), results_frame(found))


def unparsable(predictions: pd.DataFrame) -> Findings:
    """The share of sampled answers that name no label, per probe set (rows) and regime (columns); recorded per
    probe set and regime (0 throughout with the argmax reading, which always names one)."""
    table = (predictions.assign(unparsable=predictions["pred_parsed"].isna())
             .groupby(["dataset", "regime"])["unparsable"].mean().unstack())
    found = [{"name": f"{name}.unparsable_share.{regime}", "value": value,
              "note": "answers naming no label (the paper gives them a random label, ours leaves them out)"}
             for (name, regime), value in table.stack().items()]
    return Findings(table, results_frame(found))


READINGS = {"string match, random label (the paper's)": "pred_fallback",
            "string match, unparsable left out (ours)": "pred_parsed",
            "argmax (ours)": "pred_argmax"}  # reading -> the predictions' column holding it


def readings(predictions: pd.DataFrame, *, sampled: bool) -> pd.DataFrame:
    """Per probe set, regime and reading of the answers (`READINGS`; the argmax reading alone when the answers
    were not `sampled`): the accuracy
    (an unparsable answer counts as wrong) and the White sentences' mean FPR gaps over runs, so the effect of the
    paper's random label and of our alternatives can be read beside the chosen reading."""
    rows = []
    for reading, column in READINGS.items() if sampled else [("argmax (ours)", "pred_argmax")]:
        for (name, regime), table in predictions.groupby(["dataset", "regime"]):
            read = table.assign(pred=table[column])
            found = {"dataset": name, "regime": regime, "reading": reading,
                     "accuracy": float((read["gold"] == read["pred"]).mean())}
            marked = read[read["group"].isin(GROUPS) & read["pred"].notna()]
            if marked.empty:  # no answer of this reading named a label: no gaps to read
                rows.append(found)
                continue
            white = fpr_gaps(false_positive_rates(marked[RATED])).query("group == 'white'")
            rows.append(found | white.groupby("kind")["gap"].mean().rename(lambda kind: f"white_{kind}_gap").to_dict())
    return pd.DataFrame(rows)
