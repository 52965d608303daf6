"""A chapter without data says so in one sentence: no figure is drawn as an empty grid, no printed line or results
row holds 'nan'. The real case: on the default model the 60% rule excludes every framing cell, which once printed
'he +nan, she +nan, they +nan', drew Figures 5.4 and 5.5 as empty SVGs 1.8e308 px wide under captions describing
their points, and wrote 5 'nan' values to results.csv."""

from __future__ import annotations

from pathlib import Path

import altair as alt
import nbformat
import numpy as np
import pandas as pd
import pytest
from nbformat import write
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from llmaudit.chapters.framing import plots, tables
from llmaudit.chapters.framing.metrics import choice_proportions
from llmaudit.chapters.framing.pronouns import drop_excluded, exclusion_table
from llmaudit.config import load_params
from llmaudit.report import Results, build_report, show
from llmaudit.report.answer import answers
from llmaudit.report.audited import read_audited
from llmaudit.report.charts import NO_DATA, NOTHING, NoFigure, SVGFigure
from llmaudit.report.headlines import headline_rows, headline_section
from llmaudit.report.printed import printed_nans
from llmaudit.runner.chapter import Chapter
from llmaudit.verdict.verdicts import NOT_MEASURABLE, verdicts

REFERENCES = Path(__file__).resolve().parent / "notebooks"  # the ci audit's executed chapters

TOKENS = pd.DataFrame([("x", "association", g, i, 0.5, 0.3, 0.2) for g in (False, True) for i in (False, True)],
                      columns=["attribute", "task", "gender", "instr", "he", "she", "they"])


@pytest.fixture
def no_cell_kept() -> pd.DataFrame:
    """The chat prompts' choices when every answer names no pronoun, so the 60% rule excludes every cell."""
    answers = pd.DataFrame([("x", "association", g, i, None) for g in (False, True) for i in (False, True)
                            for _ in range(10)], columns=["attribute", "task", "gender", "instr", "family"])
    excluded = exclusion_table(answers)
    assert excluded["excluded"].all()
    return choice_proportions(drop_excluded(answers, excluded))


def test_a_chart_with_nothing_to_plot_is_one_sentence() -> None:
    empty = alt.Chart(pd.DataFrame({"x": [np.nan, np.nan], "task": ["a", "b"]})).mark_point().encode(x="x:Q")
    shown = show(empty)
    assert isinstance(shown, NoFigure) and shown.reason == NOTHING
    assert show(empty.facet(row="task:N"), empty="No cell is kept.").reason == "No cell is kept."
    bundle = shown._repr_mimebundle_()
    height = int(bundle["image/svg+xml"].split('height="')[1].split('"')[0])
    assert bundle[NO_DATA] == {"reason": NOTHING} and height < 100
    assert isinstance(show(alt.Chart(pd.DataFrame({"x": [0.5]})).mark_point().encode(x="x:Q")), SVGFigure)


def test_framing_with_every_cell_excluded_says_why(no_cell_kept: pd.DataFrame, tmp_path: Path) -> None:
    agreement = tables.token_vs_choice(TOKENS, no_cell_kept)
    sensitivity = tables.sensitivities(TOKENS, no_cell_kept, "plain")
    assert tables.agreement_line(agreement) == tables.NONE_KEPT
    for figure in (plots.token_vs_choice(agreement.table), plots.metric_sensitivity(sensitivity.table)):
        assert isinstance(show(figure, empty=tables.NONE_KEPT), NoFigure)
    run = Chapter("framing", load_params("ci"), tmp_path)
    run.record_table(agreement.results)
    run.record_table(sensitivity.results)
    text = (tmp_path / ".results.csv.framing.pending").read_text()
    assert "nan" not in text.lower()
    rows = pd.read_csv(tmp_path / ".results.csv.framing.pending", keep_default_na=False)
    assert (rows["value"] == "").all() and rows["note"].str.len().gt(0).all()
    assert set(rows["note"]) == {tables.NONE_KEPT, f"not measured: {tables.NO_PAIR}"}


def test_a_pronoun_without_variation_is_said_not_defined() -> None:
    choices = TOKENS.assign(he=[1.0, 0.0, 1.0, 0.0], she=[0.0, 1.0, 0.0, 1.0], they=0.0)
    line = tables.agreement_line(tables.token_vs_choice(TOKENS.assign(he=[0.9, 0.1, 0.8, 0.2]), choices))
    assert "they not defined" in line and not printed_nans(_printing(line))


def _printing(*lines: str) -> object:
    """An executed chapter whose one cell printed `lines`."""
    return new_notebook(cells=[new_markdown_cell("# Chapter 1"), new_code_cell("print(...)", outputs=[
        new_output("stream", name="stdout", text="".join(f"{line}\n" for line in lines))])])


def test_a_printed_nan_is_found_and_the_report_says_so(tmp_path: Path, capsys) -> None:
    assert printed_nans(_printing("he +0.50, she +nan", "Nancy and finance stay")) == ["cell 2 prints 'he +0.50, "
                                                                                        "she +nan'"]
    assert printed_nans(_printing("r = NaN")) and not printed_nans(_printing("nano, banana, 0.5"))
    write(_printing("they +nan"), tmp_path / "01_bad.ipynb")
    build_report(read_audited(tmp_path), "Audit", [tmp_path / "01_bad.ipynb"])
    assert "01_bad.ipynb: cell 2 prints 'they +nan': the chapter should print why" in capsys.readouterr().err


@pytest.mark.parametrize("reference", sorted(REFERENCES.glob("0*.ipynb")), ids=lambda path: path.stem)
def test_no_chapter_of_the_ci_audit_prints_nan(reference: Path) -> None:
    """The regression references (every chapter on the ci profile) print no 'nan' where a sentence belongs."""
    assert printed_nans(nbformat.read(reference, as_version=4)) == []


def test_the_report_shows_an_empty_figure_as_its_number_and_sentence(tmp_path: Path) -> None:
    bundle = NoFigure("The 60% rule excludes every cell.")._repr_mimebundle_()
    cell = new_code_cell("show(chart)", outputs=[new_output("display_data", data=bundle)])
    caption = "```{figure-caption}\n:name: fig-points\n\nOne point per kept cell.\n```"
    write(new_notebook(cells=[new_markdown_cell("# Chapter 1"), cell, new_markdown_cell(caption)]),
          tmp_path / "01_empty.ipynb")
    page = build_report(read_audited(tmp_path), "Audit", [tmp_path / "01_empty.ipynb"]).read_text()
    figure = page[page.index('<figure id="figure-fig-points"'):]
    figure = figure[:figure.index("</figure>")]
    assert "The 60% rule excludes every cell." in figure and "Figure 1.1" in figure
    assert "<svg" not in figure and "One point per kept cell" not in page


def test_a_test_recorded_without_a_score_is_not_measurable_with_its_reason(tmp_path: Path) -> None:
    results = Results(tmp_path / "results.csv")
    results.record("decision_tasks", "credit.blackbox_explicit", None, note="no case had both groups answered")
    results.record("decision_tasks", "credit.whitebox_slope", 0.001, -0.004, 0.006, n=48)
    table = verdicts(results.table()).set_index("name")
    row = table.loc["credit.blackbox_explicit"]
    assert row["verdict"] == NOT_MEASURABLE
    assert row["unmet"] == ("credit.blackbox_explicit: no case had both groups answered",)
    assert table.loc["credit.whitebox_slope", "verdict"] != NOT_MEASURABLE
    document = {"verdicts": verdicts(results.table()).to_dict("records")}
    assert all("nan" not in f"{a.interval} {a.reason}".lower() for a in answers(document))


def test_a_sampler_over_the_whole_vocabulary_records_no_top_k_and_says_why(tmp_path: Path) -> None:
    from llmaudit.models.sampling.release import Decoding

    run = Chapter("framing", load_params("ci"), tmp_path)
    run.record_table(tables.decoding_used(Decoding(), "ours").results)
    rows = pd.read_csv(tmp_path / ".results.csv.framing.pending", keep_default_na=False).set_index("name")
    assert rows.loc["decoding.top_k", "value"] == "" and "whole vocabulary" in rows.loc["decoding.top_k", "note"]
    assert float(rows.loc["decoding.temperature", "value"]) == 1.0


def test_a_headline_not_measured_says_why(tmp_path: Path) -> None:
    results = Results(tmp_path / "results.csv")
    results.record("framing", "chat.pronoun_shift", None, note="no attribute has a defined effect")
    (row,) = headline_rows(results.table())["Framing"]
    assert (row.value, row.why) == ("—", "no attribute has a defined effect")
    page = headline_section(results.table())
    assert "—¹" in page and "<li>¹ — no attribute has a defined effect.</li>" in page
