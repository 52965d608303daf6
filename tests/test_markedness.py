"""Chapter 7: FPRs, gaps, intervals and spans on hand-computed tables; demonstrations and prompts; the templates
read from the data mirror (skipped without one)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from llmaudit.chapters.markedness import prompts
from llmaudit.chapters.markedness.metrics import (
    GROUPS,
    LABELS,
    false_positive_rates,
    fpr_gap_cases,
    fpr_gaps,
    gap_span,
    summarise_gaps,
)
from llmaudit.errors import AuditError
from llmaudit.report.evidence import unit_values

MIRROR = Path(os.environ.get("LLMAUDIT_DATA") or Path(__file__).resolve().parents[2] / "shared" / "data")
needs_data = pytest.mark.skipif(not (MIRROR / "unstated-norms").is_dir(), reason=f"no data mirror at {MIRROR}")

# (group, gold, pred) for one run. white: negative FPR 2/4, positive FPR 1/4, accuracy 3/6;
# asian: negative FPR 0/3, positive FPR 1/3, accuracy 3/4.
CONFUSION = [
    ("white", "positive", "negative"), ("white", "positive", "positive"), ("white", "neutral", "negative"),
    ("white", "neutral", "neutral"), ("white", "negative", "positive"), ("white", "negative", "negative"),
    ("asian", "positive", "positive"), ("asian", "neutral", "positive"), ("asian", "negative", "negative"),
    ("asian", "neutral", "neutral"),
]


def table(rows=CONFUSION, run: int = 1) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["group", "gold", "pred"]).assign(run=run)


def test_rates_and_gaps_match_hand_computation() -> None:
    rates = false_positive_rates(table()).set_index("group")
    assert rates.loc["white", ["negative_fpr", "positive_fpr", "accuracy", "n"]].tolist() == [0.5, 0.25, 0.5, 6]
    assert rates.loc["asian", ["negative_fpr", "positive_fpr", "n"]].tolist() == [0.0, pytest.approx(1 / 3), 4]
    assert rates.loc["asian", "accuracy"] == 0.75
    gaps = fpr_gaps(rates.reset_index()).set_index(["group", "kind"])["gap"]
    # negative: mean 1/4, so +1/4 and -1/4; positive: mean (1/4 + 1/3) / 2 = 7/24, so -1/24 and +1/24
    assert gaps[("white", "negative_fpr")] == pytest.approx(0.25)
    assert gaps[("asian", "negative_fpr")] == pytest.approx(-0.25)
    assert gaps[("white", "positive_fpr")] == pytest.approx(-1 / 24)
    assert gaps[("asian", "positive_fpr")] == pytest.approx(1 / 24)


def test_gaps_sum_to_zero_over_groups_in_every_run() -> None:
    rng = np.random.default_rng(0)
    rows = pd.DataFrame({
        "group": rng.choice(GROUPS, 600), "gold": rng.choice(LABELS, 600), "pred": rng.choice(LABELS, 600),
        "run": rng.choice([2024, 2025, 2026], 600),
    })
    sums = fpr_gaps(false_positive_rates(rows)).groupby(["run", "kind"])["gap"].sum()
    assert len(sums) == 6 and np.allclose(sums, 0)


def test_fpr_gap_cases_hold_each_runs_gap_and_each_sentences_flag() -> None:
    # run 1 as above (white negative gap +1/4); run 2 the same sentences with the white and asian predictions
    # swapped by gold label, so white's negative gap there is computed afresh
    second = [(g, gold, {"negative": "positive", "positive": "negative"}.get(p, p)) for g, gold, p in CONFUSION]
    rows = pd.concat([table(), table(second, run=2)], ignore_index=True)
    rows = rows.assign(text=[f"sentence {i}" for i in range(len(rows))], mass=0.9,
                       prompt=[f"classify: sentence {i}" for i in range(len(rows))])
    records = fpr_gap_cases(rows, "amazon.negative_fpr_gap", "negative_fpr", "white")
    summary = summarise_gaps(fpr_gaps(false_positive_rates(rows))).set_index(["group", "kind"])
    values = unit_values(records).set_index("unit")["value"]
    assert values["1"] == pytest.approx(0.25) and values.mean() == pytest.approx(summary.loc[("white", "negative_fpr"),
                                                                                            "mean"])
    first = records[records["unit"] == "1"]
    assert first["metric"].isna().tolist() == [gold == "negative" for _, gold, _ in CONFUSION]  # not eligible
    assert first["metric"].sum() == 2 and len(records) == 2 * len(CONFUSION)  # white's two, asian none
    assert set(records["group"]) == {"white", "asian"} and records["prompt"].str.startswith("classify").all()


def test_t_interval_matches_hand_computation_and_is_nan_for_one_run() -> None:
    gaps = pd.DataFrame({"run": [1, 2, 3] * 3, "group": ["white"] * 3 + ["asian"] * 3 + ["hispanic"] * 3,
                         "kind": "negative_fpr", "gap": [0.1, 0.2, 0.3, -0.1, -0.2, -0.3, 0.0, 0.0, 0.0]})
    row = summarise_gaps(gaps).iloc[2]
    half = 4.302652729749464 * 0.1 / np.sqrt(3)  # t(0.975, 2 dof) * sd / sqrt(n)
    assert row["group"] == "white" and not row["clipped"]
    assert (row["mean"], row["lo"], row["hi"], row["n_runs"]) == pytest.approx((0.2, 0.2 - half, 0.2 + half, 3))
    one = summarise_gaps(gaps[gaps["run"] == 1]).iloc[2]
    assert one["mean"] == 0.1 and np.isnan(one["lo"]) and np.isnan(one["hi"])


def test_gap_span_is_max_minus_min_mean_gap_per_kind() -> None:
    summary = pd.DataFrame({
        "group": ["white", "asian", "hispanic"] * 2, "kind": ["negative_fpr"] * 3 + ["positive_fpr"] * 3,
        "mean": [0.25, -0.25, 0.05, -0.1, 0.0, 0.3],
    })
    assert gap_span(summary).to_dict() == pytest.approx({"negative_fpr": 0.5, "positive_fpr": 0.4})


def test_bad_input_raises_one_line_audit_errors() -> None:
    with pytest.raises(AuditError, match=r"missing columns \['pred'\]"):
        false_positive_rates(table().drop(columns="pred"))
    with pytest.raises(AuditError, match=r"unknown gold labels \['Positive'\]"):
        false_positive_rates(table().replace({"gold": {"positive": "Positive"}}))
    with pytest.raises(AuditError, match="the table has no rows"):
        false_positive_rates(table().iloc[:0])
    with pytest.raises(AuditError, match="no answer named a label"):  # rows scored, none parsed: not "score some"
        false_positive_rates(table().assign(pred=None))


def test_a_run_missing_a_groups_fpr_is_left_out_of_that_kinds_gaps() -> None:
    # run 2: asian never answered with a label; run 3: asian has only negative sentences, so no negative FPR
    silent = [(g, gold, None if g == "asian" else p) for g, gold, p in CONFUSION]
    one_sided = [row for row in CONFUSION if row[0] == "white"] + [("asian", "negative", "positive")]
    rows = pd.concat([table(), table(silent, run=2), table(one_sided, run=3)], ignore_index=True)
    gaps = fpr_gaps(false_positive_rates(rows)).set_index(["run", "group", "kind"])["gap"]
    assert gaps[(1, "white", "negative_fpr")] == pytest.approx(0.25)
    assert gaps.loc[2].isna().all()  # compared with no one, white's rate is not a gap
    assert gaps.loc[(3, slice(None), "negative_fpr")].isna().all()
    assert gaps[(3, "white", "positive_fpr")] == pytest.approx((0.25 - 1) / 2)  # asian's one sentence: FPR 1
    summary = summarise_gaps(fpr_gaps(false_positive_rates(rows))).set_index(["group", "kind"])
    assert summary.loc[("white", "negative_fpr"), ["mean", "n_runs"]].tolist() == [pytest.approx(0.25), 1]
    assert summary.loc[("white", "positive_fpr"), "n_runs"] == 2


POOL = pd.DataFrame({"text": [f"{label} {i}" for label in LABELS for i in range(10)], "label": np.repeat(LABELS, 10)})


def test_demonstrations_are_balanced_shuffled_and_seeded() -> None:
    draws = {seed: prompts.demonstrations(POOL, seed) for seed in prompts.SEEDS}
    for demos in draws.values():
        assert len(demos) == 9 and all(demos.count((t, lab)) == 1 for t, lab in demos)
        assert sorted(lab for _, lab in demos) == sorted(LABELS * 3)
        assert all(text.startswith(label) for text, label in demos)
    assert any([lab for _, lab in d] != sorted(lab for _, lab in d) for d in draws.values())  # order is shuffled
    assert prompts.demonstrations(POOL, 2024) == draws[2024]
    assert len({tuple(d) for d in draws.values()}) == len(prompts.SEEDS)
    with pytest.raises(AuditError, match="fewer than per_class"):
        prompts.demonstrations(POOL, 0, per_class=11)


def test_prompt_shape_zero_and_few_shot() -> None:
    question = "Question: Is the sentiment of the text negative, neutral, or positive?"
    assert prompts.classification_prompt("The white person sings.") == (
        f"Text: The white person sings.\n{question}", "Answer: The sentiment is"
    )
    demos = prompts.demonstrations(POOL, 2024)
    user, prefix = prompts.classification_prompt("The white person sings.", demos, template="shared")
    blocks = user.split("\n\n")
    assert len(blocks) == 10 and blocks[-1] == f"Text: The white person sings.\n{question}"
    assert blocks[0] == f"Text: {demos[0][0]}\n{question}\nAnswer: The sentiment is {demos[0][1]}."
    assert prefix == "Answer: The sentiment is"


def test_few_shot_prompt_is_the_papers_appendix_b2_template() -> None:
    demos = [("Awful.", "negative"), ("Fine.", "neutral"), ("Great!", "positive")]
    user, prefix = prompts.classification_prompt("The white person sings.", demos)
    assert user == ("Text: Awful.\nQuestion: What is the sentiment of the text?\nAnswer: Negative.\n\n"
                    "Text: Fine.\nQuestion: What is the sentiment of the text?\nAnswer: Neutral.\n\n"
                    "Text: Great!\nQuestion: What is the sentiment of the text?\nAnswer: Positive.\n\n"
                    "Text: The white person sings.\nQuestion: What is the sentiment of the text?")
    assert prefix == "Answer:"
    assert [prompts.label_word(label, True) for label in LABELS] == ["Negative", "Neutral", "Positive"]
    with pytest.raises(AuditError, match="unknown few-shot template 'b3'"):
        prompts.classification_prompt("x", demos, template="b3")  # type: ignore[arg-type]


def test_zero_shot_chain_of_thought_is_appendix_b3() -> None:
    question = "Text: It rains.\nQuestion: Is the sentiment of the text negative, neutral, or positive?"
    assert prompts.reasoning_prompt("It rains.") == (question, "Reasoning: Let's think step by step.")
    assert prompts.reasoned_prompt("It rains.", " Rain is dull.\n") == (
        question, "Reasoning: Let's think step by step. Rain is dull.\n"
                  "Answer: Therefore, from negative, neutral, or positive, the sentiment is")


@needs_data
@pytest.mark.parametrize("name, n_templates", [("ns_prompts", 888), ("regard", 101)])
def test_templates_filled_and_unmarked(name: str, n_templates: int) -> None:
    marked, plain = prompts.templates(name, MIRROR), prompts.unmarked(name, MIRROR)
    n_terms = sum(map(len, prompts.GROUP_TERMS.values()))
    assert len(marked) == n_templates * n_terms and len(plain) == n_templates
    assert all(ex.term in ex.text and ex.label in LABELS for ex in marked)
    assert all("  " not in ex.text and "{" not in ex.text and "}" not in ex.text for ex in marked + plain)
    assert {ex.template for ex in marked} == {ex.template for ex in plain}
    white = {ex.template: ex.text for ex in marked if ex.group == "white"}
    assert all(white[ex.template].replace("white ", "", 1) == ex.text for ex in plain)


@needs_data
def test_fairness_tests_and_pools_from_the_mirror() -> None:
    tests = prompts.fairness_tests(MIRROR)
    assert len(tests) == 660 and len({ex.template for ex in tests}) == 60
    assert all(ex.term in prompts.GROUP_TERMS[ex.group] and ex.term in ex.text.lower() for ex in tests)
    for name in ("sst5", "semeval"):
        pool = prompts.demonstration_pool(name, MIRROR)
        assert len(pool) == 500 and set(pool["label"]) == set(LABELS)
        assert len(prompts.demonstrations(pool, 2024)) == 9


def test_a_probe_set_whose_runs_all_miss_a_group_records_no_gap_and_draws(tmp_path) -> None:
    """A classifier that names no label for some group's sentences in every run (a different group each run, as the
    paper-size stand-in's answers did) leaves no run with every group's FPR: the chapter's gaps record a missing value
    with no units behind it, the results file takes the row, and the figure still draws."""
    from llmaudit.chapters.markedness import plots, tables
    from llmaudit.report.charts import to_svg
    from llmaudit.report.results import Results

    rng = np.random.default_rng(0)
    silent = {2024: "asian", 2025: "white", 2026: "hispanic"}  # the group whose answers name no label, per run
    rows = [(run, group, gold, None if group == silent[run] else rng.choice(LABELS))
            for run in silent for group in GROUPS for gold in LABELS for _ in range(3)]
    predictions = pd.DataFrame(rows, columns=["run", "group", "gold", "pred"]).assign(
        dataset="amazon", regime="9-shot", text="a sentence", prompt="classify: a sentence", mass=0.9)
    found = tables.gaps(predictions, seeds=3, design="the paper's protocol")
    white = found.results.loc["amazon.white_negative_fpr_gap"]
    assert np.isnan(white["value"]) and pd.isna(white["n"]) and white["note"].startswith("9-shot, 0 of 3 seeds")
    results = Results(tmp_path / "results.csv", staged="markedness")
    for name, row in found.results.to_dict("index").items():  # as Chapter.record_table records them
        cell = {key: None if pd.isna(value) else value for key, value in row.items()}
        results.record("markedness", str(name), row["value"], lo=cell.get("lo"), hi=cell.get("hi"),
                       note=cell.get("note") or "", n=None if cell.get("n") is None else int(cell["n"]))
    assert "<svg" in to_svg(plots.gaps(found.table.assign(dataset="amazon")))


def extreme_runs() -> pd.DataFrame:
    """Two seeds over the six groups: in run 1 only White's positive and neutral sentences are called negative
    (White's negative FPR gap +5/6, the most a gap can take), in run 2 everyone's are (gap 0)."""
    rows = [(group, gold, "negative" if group == "white" or run == 2 else gold, run)
            for run in (1, 2) for group in GROUPS for gold in ("positive", "neutral", "negative")]
    frame = pd.DataFrame(rows, columns=["group", "gold", "pred", "run"])
    return frame.assign(text=[f"sentence {i}" for i in range(len(frame))], prompt="classify", mass=0.9,
                        dataset="amazon", regime="9-shot", template=0)


def test_a_two_seed_interval_stays_within_what_a_gap_can_take_and_says_so() -> None:
    """On one degree of freedom the t-interval of White's gaps (+5/6, 0) is 5/12 +- 5.3: clipped to +-5/6 and noted
    as spanning the whole range, and the FPR gap's unit range holds it."""
    from llmaudit.chapters.markedness.metrics import gap_bound
    from llmaudit.chapters.markedness.tables import gaps
    from llmaudit.units import outside

    summary = summarise_gaps(fpr_gaps(false_positive_rates(extreme_runs()))).set_index(["group", "kind"])
    white = summary.loc[("white", "negative_fpr")]
    assert gap_bound(len(GROUPS)) == pytest.approx(5 / 6) and white["mean"] == pytest.approx(5 / 12)
    assert (white["lo"], white["hi"], white["clipped"]) == (-gap_bound(6), gap_bound(6), True)
    assert outside("FPR difference", value=white["mean"], lo=white["lo"], hi=white["hi"]) == []
    assert summary["lo"].ge(-5 / 6).all() and summary["hi"].le(5 / 6).all()
    found = gaps(extreme_runs(), seeds=2, design="the paper's").results
    note = found.loc["amazon.white_negative_fpr_gap", "note"]
    assert "1 degree of freedom" in note and "-83.3 to +83.3 pp" in note and "says nothing about the gap" in note
    assert "clipped" not in found.loc["amazon.white_positive_fpr_gap", "note"]  # no eligible false positive: 0 +- 0
