"""Assemble executed chapter notebooks into one self-contained HTML file: inline CSS and SVG, no scripts or network.
Chapter markdown is rendered as the book shows it (`report.markdown`), equations, figures, tables and exercises
numbered per chapter (Table 1.1, 1.2, 2.1 ...) as the book numbers them; everything a notebook brings passes the
sanitiser (`report.sanitiser`) first."""

from __future__ import annotations

import re
import sys
from datetime import UTC, datetime
from html import escape
from pathlib import Path

import nbformat

import llmaudit
from llmaudit.atomic import write_atomic
from llmaudit.captions import SOLUTION_TAG
from llmaudit.errors import AuditError
from llmaudit.report import markdown
from llmaudit.report.anchors import slug, unique
from llmaudit.report.answer import CSS as ANSWER_CSS
from llmaudit.report.answer import answer_section
from llmaudit.report.audited import Audited
from llmaudit.report.case_pages import CasePages, write_case_pages
from llmaudit.report.cases import CSS as CASES_CSS
from llmaudit.report.cases import cases_section
from llmaudit.report.charts import NO_DATA, spec_to_svg
from llmaudit.report.evidence_links import evidence_links
from llmaudit.report.figure_markup import accessible, chart_title, with_captions
from llmaudit.report.figures import undrawn_figures
from llmaudit.report.front import CSS as FRONT_CSS
from llmaudit.report.front import card_section
from llmaudit.report.glossary import CSS as GLOSSARY_CSS
from llmaudit.report.glossary import glossary_section
from llmaudit.report.headlines import CSS as HEADLINES_CSS
from llmaudit.report.headlines import headline_section
from llmaudit.report.media import CSS as MEDIA_CSS
from llmaudit.report.outline import Entry, contents, with_ids
from llmaudit.report.printed import printed_nans
from llmaudit.report.results_json import results_document
from llmaudit.report.sanitiser import sanitise
from llmaudit.report.summary_page import NAME as SUMMARY
from llmaudit.report.summary_page import summary_page
from llmaudit.report.tables import tidy
from llmaudit.report.verdict_page import CSS as VERDICT_CSS
from llmaudit.report.verdict_page import verdict_section

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_VEGALITE = re.compile(r"application/vnd\.vegalite\.v\d+\+json")

CSS = """
:root { --fg: #1f2328; --muted: #59636e; --border: #d1d9e0; --soft: #f6f8fa; --accent: #0969da; }
* { box-sizing: border-box; }
body { font: 16px/1.55 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif;
       color: var(--fg); background: #fff; max-width: 1400px; margin: 0 auto; padding: 1rem 1.5rem 4rem; }
section.chapter p, section.chapter li, section > p { max-width: 60rem; }
h1 { font-size: 1.75rem; line-height: 1.25; margin: 0 0 .25rem; }
h2 { font-size: 1.5rem; margin: 2.5rem 0 .75rem; padding-bottom: .3rem; border-bottom: 1px solid var(--border); }
h3 { font-size: 1.2rem; margin: 1.75rem 0 .5rem; }
h4, h5, h6 { font-size: 1rem; margin: 1.25rem 0 .5rem; }
a { color: var(--accent); }
.meta { color: var(--muted); font-size: .9rem; margin: 0; }
.failed { color: #b42318; font-size: .85rem; font-weight: 600; margin-left: .5rem; }
nav.toc { margin: 1.5rem 0 0; padding: .75rem 1.25rem; background: var(--soft);
          border: 1px solid var(--border); border-radius: 6px; }
nav.toc h2 { font-size: 1rem; margin: 0 0 .25rem; padding: 0; border: 0; }
nav.toc ol { margin: 0; padding-left: 1.5rem; }
nav.toc ol ol { font-size: .85rem; columns: 2 22rem; }
figcaption { color: var(--fg); font-size: .9rem; max-width: 60rem; margin-top: .25rem; }
table { border-collapse: collapse; border: 0; margin: 1rem 0; font-size: .9rem; font-variant-numeric: tabular-nums;
        display: block; width: max-content; max-width: 100%; overflow-x: auto; }
th, td { border: 1px solid var(--border); padding: .35rem .65rem; text-align: left; vertical-align: top; }
thead th { background: var(--soft); font-weight: 600; }
tbody tr:nth-child(even) { background: #fafbfc; }
td.num, table.dataframe td { text-align: right; }
ul.why-missing { list-style: none; padding: 0; margin: -.5rem 0 1rem; font-size: .85rem; color: var(--muted); }
table.dataframe td { max-width: 36em; }
pre.stdout { white-space: pre-wrap; }
pre, code { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, "Liberation Mono", monospace; }
code { font-size: .9em; }
pre { font-size: .85rem; line-height: 1.45; background: var(--soft); border: 1px solid var(--border);
      border-radius: 6px; padding: .75rem 1rem; overflow-x: auto; }
pre.error { color: #b42318; background: #fef3f2; border-color: #fda29b; }
details.code { margin: .75rem 0 .25rem; }
details.code summary { cursor: pointer; color: var(--muted); font-size: .85rem; }
details.code pre { margin-top: .4rem; }
details.solution { margin: .5rem 0 1rem; padding: .25rem .75rem; border-left: 3px solid var(--border); }
details.solution > summary { cursor: pointer; color: var(--muted); font-size: .85rem; }
figure { margin: 1rem 0; }
figure svg, figure img { display: block; max-width: 100%; height: auto; }
.math { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, "Liberation Mono", monospace; font-size: .9em;
        white-space: pre-wrap; }
.math.display { display: block; text-align: center; margin: .75rem 0; }
math { font-size: 1.1em; }
math[display="block"] { margin: .75rem 0; }
div.equation { display: flex; align-items: center; gap: 1rem; }
div.equation > math, div.equation > .math { flex: 1; }
span.eqno { color: var(--muted); }
div.directive { margin: 1rem 0; padding: .5rem 1rem; background: var(--soft); border-left: 4px solid var(--border); }
p.directive-title { margin: 0 0 .25rem; font-weight: 600; }
details.directive { margin: 1rem 0; padding: .25rem 1rem; border-left: 4px solid var(--border); }
details.directive > summary { cursor: pointer; color: var(--muted); }
""".strip()


def _removed(cell: nbformat.NotebookNode) -> bool:
    """Whether the report leaves the cell out: jupyter-book's remove-cell tag, or papermill's error banner."""
    return bool(set(cell.metadata.get("tags", [])) & {"remove-cell", "papermill-error-cell-tag"})


def numbers(chapters: list[tuple[int, nbformat.NotebookNode]]) -> markdown.Numbers:
    """Each labelled equation, figure, table and exercise of the chapters' shown markdown numbered within its chapter
    and kind, "N.1", "N.2", ... in reading order (N: the chapter's number), as the book numbers them; a label's first
    item keeps it."""
    found: markdown.Numbers = {}
    for chapter, nb in chapters:
        counts: dict[str, int] = {}
        for cell in nb.cells:
            shown = cell.cell_type == "markdown" and not _removed(cell)
            for item in markdown.items(cell.source) if shown else []:
                if item.label not in found:
                    counts[item.kind] = counts.get(item.kind, 0) + 1
                    found[item.label] = (item.kind, f"{chapter}.{counts[item.kind]}")
    return found


def chapter_number(path: Path, position: int) -> int:
    """A chapter notebook's number: its file name's leading digits (01_steering_vectors -> 1), else its position."""
    digits = re.match(r"\d+", path.stem)
    return int(digits[0]) if digits else position


def _title(nb: nbformat.NotebookNode) -> str | None:
    """The notebook's first heading, rendered inline, or None where it has none."""
    for cell in nb.cells:
        heading = markdown.title(cell.source) if cell.cell_type == "markdown" else None
        if heading is not None:
            return sanitise(markdown.render_inline(heading))
    return None


def _figure(svg: str) -> str:
    """An SVG inlined in the page, sanitised (which also drops the XML prolog and DOCTYPE, invalid inside HTML), as
    one image labelled by its title until its caption labels it (`figure_markup.with_captions`)."""
    clean = sanitise(svg).strip()
    return f"<figure>{accessible(clean, chart_title(clean) or 'chart')}</figure>"


def _output(out: nbformat.NotebookNode) -> str:
    """One cell output as HTML, in its richest static form.

    stderr (progress bars, logs, warnings) and widgets are dropped; vega-lite specs are rendered to SVG; text is
    escaped and markup (SVG, images, HTML, markdown) sanitised, since the report runs no JavaScript and fetches
    nothing.
    """
    if out.output_type == "stream":
        return f"<pre class=\"stdout\">{escape(_ANSI.sub('', out.text))}</pre>" if out.name == "stdout" else ""
    if out.output_type == "error":
        text = _ANSI.sub("", "\n".join(out.get("traceback", []))) or f"{out.ename}: {out.evalue}"
        return f'<pre class="error">{escape(text)}</pre>'
    data = out.get("data", {})
    if "application/vnd.jupyter.widget-view+json" in data:
        return ""
    if NO_DATA in data:  # a figure with nothing to plot: its sentence, which its caption then reads (with_captions)
        return f'<figure class="no-data"><p>{escape(str(data[NO_DATA].get("reason", "")))}</p></figure>'
    for mime, spec in data.items():
        if _VEGALITE.fullmatch(mime):
            try:
                return _figure(spec_to_svg(spec))
            except ValueError as e:
                return f'<pre class="error">chart not rendered: {escape(str(e))}</pre>'
    if "image/svg+xml" in data:
        return _figure(data["image/svg+xml"])
    for mime in ("image/png", "image/jpeg"):
        if mime in data:
            return sanitise(f'<figure><img alt="" src="data:{mime};base64,{"".join(data[mime].split())}"></figure>')
    if "text/html" in data:
        return f'<div class="output">{tidy(sanitise(data["text/html"]))}</div>'
    if "text/markdown" in data:
        return f'<div class="output">{sanitise(markdown.render(data["text/markdown"]))}</div>'
    if "text/plain" in data:
        return f"<pre>{escape(_ANSI.sub('', data['text/plain']))}</pre>"
    return ""


def _cell(cell: nbformat.NotebookNode, numbered: markdown.Numbers) -> str:
    """One cell as HTML, honouring jupyter-book's remove-* tags and folding a hide-cell or `solution` cell (an
    exercise's solution code) whole, code and outputs; papermill's big red error banners are dropped too.
    `numbered` numbers the labelled items of markdown cells (`numbers`)."""
    if _removed(cell):
        return ""
    if cell.cell_type == "markdown":
        return sanitise(markdown.render(cell.source, numbered))
    if cell.cell_type != "code":
        return ""
    tags = set(cell.metadata.get("tags", []))
    parts = []
    if "remove-input" not in tags and cell.source.strip():
        code = f"<pre><code>{escape(cell.source)}</code></pre>"
        parts.append(f'<details class="code"><summary>code</summary>{code}</details>')
    if "remove-output" not in tags:
        shown = [out for out in cell.outputs if not ("remove-stderr" in tags and out.get("name") == "stderr")]
        parts.extend(_output(out) for out in shown)
    body = "\n".join(p for p in parts if p)
    folded = tags & {"hide-cell", SOLUTION_TAG}
    return f'<details class="solution"><summary>solution</summary>{body}</details>' if folded else body


def _front(audited: Audited, numbered: markdown.Numbers, anchors: dict[str, str], pages: CasePages
           ) -> list[tuple[str, str, str]]:
    """The sections before the chapters, in page order, as (id, title, HTML; '' where the section is empty): the
    verdict page (each test linked to its evidence), the model card, the headline numbers, the cases (linking the
    `pages` of every case), the glossary."""
    table, card, decided = audited.rows, audited.card, audited.verdicts
    cases = cases_section(audited, pages.chapters)
    links = (evidence_links(table, decided, numbered, anchors, cases, pages.tests)
             if table is not None and not decided.empty else {})
    return [("verdicts", "Verdicts", verdict_section(decided, links) if not decided.empty else ""),
            ("model-card", "Model card", card_section(card)),
            ("summary", "Headline numbers", headline_section(table, card) if table is not None else ""),
            ("cases", "Cases behind the gaps", cases),
            ("glossary", "Glossary", glossary_section() if not decided.empty else "")]


def build_report(
    audited: Audited,
    title: str,
    notebooks: list[Path],
    out: Path | None = None,
    generated: str | None = None,
) -> Path:
    """Write one self-contained HTML report of the notebooks and results.csv's headline table; return its path.

    The output depends only on the inputs and `generated` (default: the current UTC time), so reports can be diffed.
    """
    report_dir = audited.folder
    out = Path(out) if out is not None else report_dir / "report.html"
    generated = generated or datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    taken: set[str] = set()
    toc: list[tuple[Entry, list[tuple[str, str]]]] = []
    chapters, anchors = [], {}
    read = [(path, nbformat.read(path, as_version=4)) for path in map(Path, notebooks)]
    numbered = numbers([(chapter_number(path, i), nb) for i, (path, nb) in enumerate(read, start=1)])
    for path, nb in read:
        heading = _title(nb)
        anchor = unique(f"ch-{slug(path.stem)}", taken)
        anchors[re.sub(r"^\d+_", "", path.stem)] = anchor
        failed = any(out.output_type == "error" for cell in nb.cells for out in cell.get("outputs", []))
        undrawn = [] if failed else undrawn_figures(nb)  # a failed chapter stops short of its later figures
        if undrawn:
            raise AuditError(f"{path.name}: {'; '.join(undrawn)}: end that cell with the figure's show(...) call")
        for nan in printed_nans(nb):  # the audit keeps its report; the chapter's own tests refuse the nan
            print(f"llmaudit: {path.name}: {nan}: the chapter should print why the number is missing", file=sys.stderr)
        flag = '<span class="failed">execution error</span>' if failed else ""
        cells = [] if heading else [f"<h2>{escape(path.stem)}</h2>"]
        cells += [html for html in (_cell(cell, numbered) for cell in nb.cells) if html]
        body, headings = with_ids("\n".join(with_captions(cells)), anchor, taken)
        toc.append((Entry(anchor, heading or escape(path.stem), flag), headings))
        chapters.append(f'<section class="chapter" id="{anchor}">\n{body}\n</section>')
    card, table = audited.card, audited.rows
    front = []
    in_folder = out.parent == report_dir  # the pages beside the report, which links them by relative paths
    pages = write_case_pages(audited, f"{CSS}\n{FRONT_CSS}", title) if in_folder else CasePages()
    for anchor, name, section in _front(audited, numbered, anchors, pages):
        if section:
            html, headings = with_ids(section, anchor, taken)
            front.append((Entry(anchor, name), headings, html))
    toc = [(entry, headings) for entry, headings, _ in front] + toc
    document = results_document(audited) if card and table is not None else {}
    summary = summary_page(document, title) if document and in_folder else ""
    if summary:
        write_atomic(report_dir / SUMMARY, summary)
    answer, _ = with_ids(answer_section(document, SUMMARY if summary else None) if document else "", "answer", taken)
    count = f"{len(notebooks)} notebook{'s' * (len(notebooks) != 1)}"
    source = f"{count} in {escape(report_dir.name)}/"
    meta = f"Generated {escape(generated)} by llmaudit {llmaudit.__version__} from {source}"
    page = "\n".join(
        [
            "<!DOCTYPE html>",
            '<html lang="en">',
            "<head>",
            '<meta charset="utf-8">',
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            f"<title>{escape(title)}</title>",
            f"<style>\n{CSS}\n{FRONT_CSS}\n{VERDICT_CSS}\n{ANSWER_CSS}\n{HEADLINES_CSS}\n{CASES_CSS}\n{GLOSSARY_CSS}\n"
            f"{MEDIA_CSS}\n</style>",
            "</head>",
            "<body>",
            f'<header><h1>{escape(title)}</h1><p class="meta">{meta}</p></header>',
            answer,
            contents(toc),
            *(html for _, _, html in front),
            *chapters,
            "</body>",
            "</html>",
            "",
        ]
    )
    return write_atomic(out, page)
