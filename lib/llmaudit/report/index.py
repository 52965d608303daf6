"""The cross-model index: every audited model under reports/ with its verdicts side by side, as a page of the
book (index.md) and as a self-contained HTML page (index.html). Built from the report folders' files alone, so
every string in them (folder names above all) is escaped for the page it goes into."""

from __future__ import annotations

import math
from html import escape
from pathlib import Path
from urllib.parse import quote

import altair as alt
import pandas as pd

from llmaudit.atomic import write_atomic
from llmaudit.chapters.similarity.compare import (
    Grams,
    cka_across_depths,
    cka_matrix,
    cka_summary,
    similarity_matrix,
    unk_flip_matrix,
)
from llmaudit.chapters.similarity.plots import matrix, stereotype_scores
from llmaudit.chapters.similarity.saved import FOLDER, load_stereoset_answers, load_systems
from llmaudit.chapters.similarity.stereoset import stereoset_scores
from llmaudit.errors import AuditError
from llmaudit.report.card import CARD, read_json
from llmaudit.report.charts import to_svg
from llmaudit.report.comparison import FOLDER as COMPARE_FOLDER
from llmaudit.report.comparison_files import comparison_pages, page_label
from llmaudit.report.front import CSS as FRONT_CSS
from llmaudit.report.front import badge
from llmaudit.report.html import CSS, sanitise
from llmaudit.report.myst import literal, raw_html
from llmaudit.report.results import Results
from llmaudit.verdict.gates import NOT_CHECKED
from llmaudit.verdict.verdicts import from_card

SIMILARITY = ("Each audited model and its gender-steered versions answer the same BBQ questions (similarity chapter): "
              "how alike their answers are (histogram cosine), how often one abstains where the other follows the "
              "stereotype (UNK flip), how alike their representations are (linear CKA at one relative depth, and "
              "averaged over matching relative depths), and, forced to choose on StereoSet, how often each picks the "
              "stereotype.")
INTRO = ("Each column is one model's audit (its report: `reports/<model>/report.html`); each row one invariance test. "
         "A cell gives the verdict against that model's epsilon and gate thresholds (not measurable: the test's "
         "instrument failed a gate on that model) and the score with its 95% interval.")
COMPARE = ("Two audited models compared test by test on the cases both drew (`llmaudit compare A B`): "
           "D = |score A| - |score B| with a paired bootstrap interval, tied or one model more biased against epsilon.")


def audited(reports: Path, own: str | None = None) -> tuple[dict[str, pd.DataFrame], list[str]]:
    """Verdict tables of every report folder that has a model card and a results file, by model name; and, for each
    folder whose files are damaged, why it was left out (one bad folder never stops another model's index; the
    `own` folder, the one just audited, stops with its error)."""
    found, skipped = {}, []
    for folder in sorted(p for p in Path(reports).iterdir() if p.is_dir()):
        try:
            card, results = read_json(folder / CARD), folder / "results.csv"
            if card and results.exists():
                found[folder.name] = from_card(Results(results).table(), card)
        except AuditError as err:
            if folder.name == own:
                raise
            skipped.append(f"{folder.name}: {err}")
    return found, skipped


def _systems(reports: Path, model: str) -> set[str]:
    """The system names of one model's saved similarity results; a representation key that is not 'system|depth'
    with a finite depth (which the figure splits) is a one-line AuditError."""
    answers, reps = load_systems(reports, [model])
    for key in reps:
        system, _, depth = key.rpartition("|")
        try:
            readable = bool(system) and math.isfinite(float(depth))
        except ValueError:
            readable = False
        if not readable:
            raise AuditError(f"similarity results of {model} hold a representation {key!r} not named 'system|depth': "
                             f"rerun the similarity chapter of {model}")
    return set(answers["system"])


def similarity_figure(reports: Path, models: list[str], own: str | None = None) -> tuple[str, list[str]]:
    """SVGs comparing every system (model, or model steered) of the audited models whose similarity chapter has
    run: answer-histogram cosine, UNK flip, linear CKA at the deepest depth they share and averaged over matching
    depths, and StereoSet's stereotype score ('' when none has run); and
    why a model's systems were left out: damaged files, or systems named as an earlier folder's (a copied folder);
    damaged files of the `own` folder stop with their error."""
    ran: list[str] = []
    skipped: list[str] = []
    seen: set[str] = set()
    for model in (m for m in models if (Path(reports) / m / FOLDER / "answers.csv").exists()):
        try:
            names = _systems(reports, model)
        except AuditError as err:
            if model == own:
                raise
            skipped.append(f"{model}: {err}")
            continue
        if names & seen:
            repeated = ", ".join(sorted(names & seen))
            skipped.append(f"{model}: its similarity systems are named as another folder's ({repeated}): a copy of a "
                           "report folder? Remove one of them")
            continue
        seen |= names
        ran.append(model)
    if not ran:
        return "", skipped
    answers, reps = load_systems(reports, ran)
    systems = list(dict.fromkeys(answers["system"]))
    cosine = similarity_matrix({name: part for name, part in answers.groupby("system", sort=False)})
    depths = {float(key.rsplit("|", 1)[1]) for key in reps}
    shared = [d for d in depths if all(f"{name}|{d:g}" in reps for name in systems)]
    charts: list[alt.TopLevelMixin] = [
        matrix(cosine.loc[systems, systems], "cosine").properties(title="Cosine similarity of answer histograms"),
        matrix(unk_flip_matrix(answers).loc[systems, systems], "UNK flip").properties(
            title="UNK flip: share of the row's committed answers the column answers Unknown"),
    ]
    grams = Grams(reps)  # every pair of systems at every pair of depths: each Gram matrix once
    if shared:
        cka = cka_matrix(reps, max(shared), grams).loc[systems, systems]
        charts.append(matrix(cka, "CKA").properties(title=f"Linear CKA, relative depth {max(shared):g}"))
    diagonal = pd.DataFrame({b: {a: cka_summary(cka_across_depths(reps, a, b, grams))["diagonal"] for a in systems}
                             for b in systems}).loc[systems, systems]
    charts.append(matrix(diagonal, "CKA").properties(title="Linear CKA across depths: mean over matching depths"))
    forced = load_stereoset_answers(reports, ran)
    if len(forced):
        scores = pd.concat([stereoset_scores(part).loc[["overall"]].assign(system=name)
                            for name, part in forced.groupby("system", sort=False)]).rename_axis("bias_type")
        charts.append(stereotype_scores(scores.reset_index()).properties(
            title="StereoSet forced choice: stereotype score (50: no preference)"))
    return "\n".join(sanitise(to_svg(chart)) for chart in charts), skipped


def side_by_side(tables: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """(requirement, test) rows by model columns; a cell is (verdict, score, lo, hi, gate state) or missing."""
    cells = {
        model: {(r.requirement, r.test): (r.verdict, r.score, r.lo, r.hi, r.gate)
                for r in table.itertuples(index=False)}
        for model, table in tables.items()
    }
    keys = list(dict.fromkeys(key for table in cells.values() for key in table))
    return pd.DataFrame({model: [found.get(key) for key in keys] for model, found in cells.items()},
                        index=pd.MultiIndex.from_tuples(keys, names=["requirement", "test"]) if keys else None)


def _score(cell: tuple) -> str:
    return f"{cell[1]:+.3f} [{cell[2]:+.3f}, {cell[3]:+.3f}]"


def _unchecked(cell: tuple) -> str:
    return " (gate not checked)" if cell[4] == NOT_CHECKED else ""


def _cell_text(cell: tuple | None) -> str:
    return "" if cell is None else f"{literal(cell[0] + _unchecked(cell))} {_score(cell)}"


def _markdown(grid: pd.DataFrame, figure: str, skipped: list[str]) -> str:
    """The index as a MyST page of the book (the similarity figure as inline SVG), naming the folders left out."""
    lines = ["# Audited models", "", INTRO, ""]
    lines += [f"Left out: {literal(reason)}" for reason in skipped] + ([""] if skipped else [])
    if grid.empty:
        return "\n".join([*lines, "No model has been audited yet: run `make audit`.", ""])
    models = " | ".join(map(literal, grid.columns))
    lines += [f"| Requirement | Test | {models} |", "|---|---|" + "---|" * len(grid.columns)]
    for (requirement, test), row in grid.iterrows():
        lines.append(f"| {literal(requirement)} | {literal(test)} | " + " | ".join(_cell_text(c) for c in row) + " |")
    if figure:
        lines += ["", "## Bias similarity", "", SIMILARITY, "", raw_html(figure)]
    return "\n".join([*lines, ""])


def _comparisons(reports: Path) -> str:
    """Links to every comparison page under reports/compare/ (`llmaudit compare`); '' when there is none."""
    pages = comparison_pages(reports)
    if not pages:
        return ""
    items = "\n".join(f'<li><a href="{COMPARE_FOLDER}/{escape(quote(page.name))}">{escape(page_label(page))}</a></li>'
                      for page in pages)
    return f"\n<h2>Model comparisons</h2>\n<p>{escape(COMPARE)}</p>\n<ul>\n{items}\n</ul>"


def _html(grid: pd.DataFrame, figure: str, comparisons: str = "", skipped: tuple[str, ...] = ()) -> str:
    """The index as one self-contained HTML page (same styles as the reports), with links to the comparison
    pages (`comparisons`, from `_comparisons`), naming the folders left out."""
    head = "".join(f'<th><a href="{escape(quote(m))}/report.html">{escape(m)}</a></th>' for m in grid.columns)
    rows = []
    for (requirement, test), row in grid.iterrows():
        cells = "".join(
            "<td></td>" if c is None else f"<td>{badge(c[0])}{escape(_unchecked(c))}<br>{_score(c)}</td>" for c in row
        )
        rows.append(f"<tr><td>{escape(requirement)}</td><td>{escape(test)}</td>{cells}</tr>")
    body = (f'<table class="verdicts"><thead><tr><th>Requirement</th><th>Test</th>{head}</tr></thead><tbody>'
            + "\n".join(rows) + "</tbody></table>") if rows else "<p>No model has been audited yet.</p>"
    left_out = "".join(f'<p class="unchecked">Left out: {escape(reason)}</p>\n' for reason in skipped)
    if figure:
        body += f"\n<h2>Bias similarity</h2>\n<p>{escape(SIMILARITY)}</p>\n<figure>{figure}</figure>"
    body += comparisons
    return (f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n<title>Audited models</title>\n'
            f"<style>\n{CSS}\n{FRONT_CSS}\nbody {{ max-width: none; }}\n</style>\n</head>\n<body>\n"
            f"<h1>Audited models</h1>\n<p>{escape(INTRO)}</p>\n{left_out}{body}\n</body>\n</html>\n")


def build_index(reports: Path, own: str | None = None) -> Path:
    """Write reports/index.md and reports/index.html, leaving out and naming damaged or copied sibling folders (a
    damaged `own` folder, the one just audited, stops with its error); returns the HTML path."""
    reports = Path(reports)
    tables, damaged = audited(reports, own)
    figure, copied = similarity_figure(reports, list(tables), own)
    grid, skipped = side_by_side(tables), damaged + copied
    write_atomic(reports / "index.md", _markdown(grid, figure, skipped))
    return write_atomic(reports / "index.html", _html(grid, figure, _comparisons(reports), tuple(skipped)))
