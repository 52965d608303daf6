"""Tests for the reporting layer: deterministic SVG charts, the results file and the self-contained HTML report."""

import re
import textwrap
from pathlib import Path

import altair as alt
import nbformat
import pandas as pd
import papermill
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from llmaudit.errors import DataError
from llmaudit.report import Results, build_report, charts, show
from llmaudit.report.audited import read_audited


def bias_chart(title: str = "Stereotype preference by group") -> alt.Chart:
    """A real chart with a continuous colour legend and clipped marks, the parts vega gives global-counter ids."""
    df = pd.DataFrame({"group": ["age", "gender", "race", "religion"], "score": [0.12, 0.31, 0.27, 0.05]})
    return (
        alt.Chart(df, title=title)
        .mark_bar(clip=True)
        .encode(x="group:N", y=alt.Y("score:Q", scale=alt.Scale(domain=[0, 0.3])), color="score:Q")
    )


# --- charts -------------------------------------------------------------------------------------------------------


def test_show_is_deterministic_and_has_title() -> None:
    first, second = show(bias_chart())._repr_svg_(), show(bias_chart())._repr_svg_()
    assert first == second
    assert first.startswith("<svg")
    assert "Stereotype preference by group" in first
    assert "<script" not in first


def test_svg_ids_are_normalised_and_unique_per_chart() -> None:
    svg_a = charts.to_svg(bias_chart("A"))
    svg_b = charts.to_svg(bias_chart("B"))
    ids_a = set(re.findall(r'\bid="([^"]+)"', svg_a))
    ids_b = set(re.findall(r'\bid="([^"]+)"', svg_b))
    assert ids_a, "the chart should have clip/gradient ids to check"
    assert not any(re.fullmatch(r"(clip|gradient_)\d+", i) for i in ids_a)
    assert ids_a.isdisjoint(ids_b)
    for ref in re.findall(r"url\(#([^)]+)\)", svg_a):
        assert ref in ids_a


def test_theme_sets_width_and_chart_config_wins() -> None:
    themed = charts.to_svg(bias_chart())
    assert 'font-size="17px"' in themed  # the theme's title size
    assert 500 < int(re.search(r'width="(\d+)"', themed)[1]) < 800
    narrow = charts.to_svg(bias_chart().properties(width=200))
    assert int(re.search(r'width="(\d+)"', narrow)[1]) < 400
    assert alt.theme.active != charts.THEME  # rendering leaves the global theme alone


def test_save_writes_svg(tmp_path: Path) -> None:
    path = charts.save(bias_chart(), tmp_path / "figs" / "bias.svg")
    assert path.read_text(encoding="utf-8") == charts.to_svg(bias_chart())
    with pytest.raises(ValueError, match=r"\.svg"):
        charts.save(bias_chart(), tmp_path / "bias.png")


# --- results ------------------------------------------------------------------------------------------------------


def test_results_upsert_and_reopen(tmp_path: Path) -> None:
    path = tmp_path / "reports" / "tiny" / "results.csv"
    res = Results(path)
    res.record("bbq", "bias_score", 0.25, lo=0.2, hi=0.3, note="ambiguous contexts")
    res.record("bbq", "n_items", 1200, unit="items")
    res.record("steering", "layer", 14)
    res.record("steering", "dataset", "crows_pairs")
    res.record("bbq", "bias_score", 0.5, lo=0.45, hi=0.55)  # upsert: replaces in place

    reopened = Results(path)
    table = reopened.table()
    assert len(table) == 4
    assert not table.duplicated(["chapter", "name"]).any()
    assert list(table["name"]) == ["bias_score", "n_items", "layer", "dataset"]
    assert reopened.get("bbq", "bias_score") == 0.5
    assert table.loc[0, "lo"] == 0.45 and table.loc[0, "note"] == ""
    layer = reopened.get("steering", "layer")
    assert layer == 14 and isinstance(layer, int)
    assert reopened.get("steering", "dataset") == "crows_pairs"
    assert pd.isna(reopened.table("steering")["lo"]).all()
    assert list(reopened.table("bbq")["unit"]) == ["", "items"]
    assert path.read_text().splitlines()[0] == "chapter,name,value,lo,hi,unit,note,n,meaning,flag"
    assert sorted(p.name for p in path.parent.iterdir()) == [".results.csv.lock", "results.csv"]  # no temp files
    with pytest.raises(KeyError):
        reopened.get("bbq", "missing")


def test_results_keeps_rows_from_another_writer(tmp_path: Path) -> None:
    path = tmp_path / "results.csv"
    first, second = Results(path), Results(path)
    first.record("ch1", "a", 1.5)
    second.record("ch2", "b", "x")
    assert Results(path).table()["name"].tolist() == ["a", "b"]


def test_results_rejects_bad_input(tmp_path: Path) -> None:
    res = Results(tmp_path / "results.csv")
    with pytest.raises(TypeError):
        res.record("ch", "x", [1.0])
    with pytest.raises(TypeError):
        res.record("ch", "x", 1.0, lo="low")
    with pytest.raises(ValueError):
        res.record("", "x", 1.0)
    (tmp_path / "bad.csv").write_text("a,b\n1,2\n")
    with pytest.raises(DataError, match="expected columns"):
        Results(tmp_path / "bad.csv")


# --- html report ----------------------------------------------------------------------------------------------------

CHAPTER_MD = textwrap.dedent(
    r"""
    # Chapter 1: Black-box bias

    | group | score |
    |-------|-------|
    | age   | 0.12  |

    The score is $s_i = p_i^2$ per item and overall

    $$\bar{s} = \frac{1}{n} \sum_i s_i$$
    """
)


def chapter_notebook() -> nbformat.NotebookNode:
    """The sample chapter: prose with a table and math, a chart, a pandas table, a progress bar and a removed cell."""
    code = [
        new_code_cell(
            "import altair as alt, pandas as pd, sys\n"
            "from llmaudit.report import show\n"
            "df = pd.DataFrame({'group': ['age', 'gender'], 'score': [0.12, 0.31]})"
        ),
        new_code_cell(
            "show(alt.Chart(df, title='Scores by group').mark_bar().encode(x='group:N', y='score:Q'))"
        ),
        new_code_cell("df.rename(columns={'score': 'mean_score'})"),
        new_code_cell("print('scoring:', 25 * 2, '%', file=sys.stderr)"),
        new_code_cell("print('SECRET_OUTPUT')  # SECRET_SOURCE", metadata={"tags": ["remove-cell"]}),
        new_code_cell("print('VISIBLE' + '_OUTPUT')  # HIDDEN_INPUT", metadata={"tags": ["remove-input"]}),
        new_code_cell("print('HIDDEN' + '_OUTPUT')  # VISIBLE_INPUT", metadata={"tags": ["remove-output"]}),
    ]
    nb = new_notebook(cells=[new_markdown_cell(CHAPTER_MD), *code])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return nb


@pytest.fixture(scope="module")
def executed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sample chapter executed with papermill, as the audit does."""
    root = tmp_path_factory.mktemp("book")
    src, out = root / "01_blackbox.ipynb", root / "reports" / "tiny" / "01_blackbox.ipynb"
    out.parent.mkdir(parents=True)
    nbformat.write(chapter_notebook(), src)
    papermill.execute_notebook(src, out, kernel_name="python3", progress_bar=False, cwd=root)
    return out


def test_report_from_executed_notebook(executed: Path) -> None:
    report_dir = executed.parent
    Results(report_dir / "results.csv").record("blackbox", "bias_score", 0.1234, lo=0.1, hi=0.15, unit="score")
    Results(report_dir / "results.csv").record("steering", "layer", 14)
    path = build_report(read_audited(report_dir), "Audit of tiny", [executed], generated="2025-01-01 00:00 UTC")
    assert path == report_dir / "report.html"
    html = path.read_text(encoding="utf-8")

    # self-contained: nothing fetched from elsewhere
    assert not re.search(r"<script\b", html, re.I)
    assert not re.search(r"""<link[^>]+href=["']?https?:""", html, re.I)
    assert not re.search(r"""\ssrc=["']?https?:""", html, re.I)
    assert "@import" not in html and "url(http" not in html

    # header, contents, summary first, then the chapter
    assert "<h1>Audit of tiny</h1>" in html and "2025-01-01 00:00 UTC" in html
    assert '<a href="#summary">' in html and '<a href="#ch-01-blackbox">Chapter 1: Black-box bias</a>' in html
    assert html.index('id="summary"') < html.index('id="ch-01-blackbox"')
    assert "All 2 numbers of this audit" in html and '<a href="results.csv">results.csv</a>' in html
    assert "bias_score" not in html  # no chapter declares it headline: it stays in the results files

    # markdown: table, and math as native MathML (inline and display)
    assert '<table id="ch-01-blackbox-table">' in html and "<td>age</td>" in html
    assert re.search(r'<math [^>]*display="inline"><mrow><msub><mi>s</mi><mi>i</mi></msub>', html)
    assert re.search(r'<math [^>]*display="block">.*<mfrac>', html)

    # outputs: inline svg chart, pandas html table, code hidden in details
    assert re.search(r"<figure id=\"[^\"]+\"><svg[^>]*>", html) and "Scores by group" in html
    assert "mean_score" in html and 'class="dataframe"' in html
    assert "<details class=\"code\"><summary>code</summary>" in html

    # dropped: stderr (progress bars), removed cells; stdout kept; tags honoured
    assert any(o.output_type == "stream" for c in nbformat.read(executed, 4).cells for o in c.get("outputs", []))
    assert "scoring: 50 %" not in html
    assert "<pre class=\"stdout\">VISIBLE_OUTPUT\n</pre>" in html
    assert "SECRET_OUTPUT" not in html and "SECRET_SOURCE" not in html
    assert "VISIBLE_OUTPUT" in html and "HIDDEN_INPUT" not in html
    assert "VISIBLE_INPUT" in html and "HIDDEN_OUTPUT" not in html

    # deterministic given the same inputs and timestamp
    again = build_report(
        read_audited(report_dir), "Audit of tiny", [executed], out=report_dir / "again.html",
        generated="2025-01-01 00:00 UTC",
    )
    assert again.read_text(encoding="utf-8") == html


def display(data: dict) -> nbformat.NotebookNode:
    """A code cell with one display_data output."""
    return new_code_cell("display(x)", outputs=[new_output("display_data", data=data)])


def test_report_outputs_errors_images_and_vegalite(tmp_path: Path) -> None:
    spec = bias_chart("Raw vega-lite output").to_dict()
    remote = alt.Chart("https://example.com/d.csv").mark_point().to_dict()
    error = new_output(
        "error",
        ename="ZeroDivisionError",
        evalue="division by zero",
        traceback=["\x1b[31mZeroDivisionError\x1b[0m: division by zero"],
    )
    cells = [
        new_code_cell("1/0", outputs=[error]),
        display({"image/png": "iVBORw0KGgo=\n", "text/plain": "<Image>"}),
        display({"application/vnd.vegalite.v6+json": spec, "text/html": '<script src="https://cdn.example/v.js">'}),
        display({"application/vnd.vegalite.v6+json": remote}),
        display({"text/html": '<b>kept</b><script>x()</script><link rel="stylesheet" href="https://cdn.example/c">'}),
        display({"application/vnd.jupyter.widget-view+json": {"model_id": "m"}, "text/plain": "WIDGET_BAR 0%|"}),
    ]
    nb_path = tmp_path / "02 white box.ipynb"
    nbformat.write(new_notebook(cells=cells), nb_path)
    html = build_report(read_audited(tmp_path), "T", [nb_path], generated="now").read_text(encoding="utf-8")
    assert '<pre class="error">ZeroDivisionError: division by zero</pre>' in html
    assert 'src="data:image/png;base64,iVBORw0KGgo="' in html
    assert "Raw vega-lite output" in html and "cdn.example" not in html and "<script" not in html
    assert "chart not rendered" in html and "External data url not allowed" in html
    assert "<b>kept</b>" in html and "WIDGET_BAR" not in html
    assert '<h2>02 white box</h2>' in html and 'href="#ch-02-white-box"' in html
    assert 'id="summary"' not in html  # no results.csv, no summary section


MYST_MD = textwrap.dedent(
    r"""
    # MyST constructs

    A {term}`steering vector <Steering vector>` has a {term}`Sensitivity`; the score {eq}`eq-score` adds up to
    {eq}`eq-total`, {eq}`eq-elsewhere` is in no chapter here, and {math}`a^2` is inline.

    $$s = \frac{a}{b}$$ (eq-score)

    $$
    t = \sum_i s_i
    $$ (eq-total)

    $$u = 1$$

    ```{math}
    :label: eq-directive
    v = w
    ```

    ```{note}
    A note about {term}`a term <Target>`.
    ```

    ```{admonition} Read this
    :class: tip
    Body text.
    ```
    """
)
LATER_MD = "# Later\n\nAs in {eq}`eq-score`:\n\n$$x = y$$ (eq-later)\n"


def test_report_renders_myst_roles_equations_and_directives(tmp_path: Path) -> None:
    """Roles show their text ({term}) or the equation number linked to the equation ({eq}); labelled equations, $$ ...
    $$ (label) or {math} with :label:, are numbered per chapter in reading order (chapter.k, the chapter's number from
    its file name), as the book numbers them; directives become titled boxes. No role, label or option is left as raw
    text."""
    paths = [tmp_path / "01_myst.ipynb", tmp_path / "02_later.ipynb"]
    for path, source in zip(paths, (MYST_MD, LATER_MD)):
        nbformat.write(new_notebook(cells=[new_markdown_cell(source)]), path)
    html = build_report(read_audited(tmp_path), "T", paths, generated="now").read_text(encoding="utf-8")

    for raw in ("{term}", "{eq}", "{math}", "{note}", "{admonition}", ":label:", ":class:", "<Steering vector>",
                "(eq-score)", "(eq-total)", "(eq-later)", "$$"):
        assert raw not in html, raw
    assert "A steering vector has a Sensitivity" in html and "A note about a term." in html
    link = r'<a href="#equation-{}"[^>]*>\({}\)</a>'
    assert re.search(link.format("eq-score", r"1\.1") + r" adds up to\n" + link.format("eq-total", r"1\.2"), html)
    assert "(eq-elsewhere) is in no chapter here" in html
    assert re.search(r'<math [^>]*display="inline"><mrow><msup><mi>a</mi><mn>2</mn></msup>', html)
    for label, number, first in (("eq-score", r"1\.1", "<mfrac>"), ("eq-total", r"1\.2", "<munder>"),
                                 ("eq-directive", r"1\.3", "<mi>v</mi>"), ("eq-later", r"2\.1", "<mi>x</mi>")):
        equation = rf'<div class="equation" id="equation-{label}"><math [^>]*display="block">.*?{first}.*?</math>'
        assert re.search(equation + rf'<span class="eqno">\({number}\)</span></div>', html, re.S), label
    assert re.search(r'</div>\s*<math [^>]*display="block"><mrow><mi>u</mi>', html)  # unlabelled: no number
    assert re.search("As in " + link.format("eq-score", r"1\.1"), html)
    assert '<div class="directive note"><p class="directive-title">Note</p>' in html
    assert '<div class="directive admonition"><p class="directive-title">Read this</p><p>Body text.</p>' in html


def test_results_clear_removes_only_that_chapter(tmp_path) -> None:
    results = Results(tmp_path / "results.csv")
    results.record("a", "x", 1.0)
    results.record("a", "stale", 2.0)
    results.record("b", "y", 3.0)
    results.clear("a")
    reopened = Results(tmp_path / "results.csv")
    assert reopened.table()["name"].tolist() == ["y"]
    with pytest.raises(KeyError):
        reopened.get("a", "x")


def test_exercise_solutions_are_folded_whole(tmp_path: Path) -> None:
    """A hide-cell cell (an exercise's solution) is one folded block holding its code and its outputs, its progress
    bars on stderr dropped like any remove-stderr cell's; a dropdown admonition (its discussion) is folded too."""
    solution = new_code_cell("answer = 6 * 7\nanswer", outputs=[
        new_output("stream", name="stderr", text="sweep: 100%|###| 4/4\n"),
        new_output("execute_result", data={"text/plain": "42"}, execution_count=1)])
    solution.metadata["tags"] = ["hide-cell", "remove-stderr"]
    shown = new_code_cell("1 + 1", outputs=[new_output("execute_result", data={"text/plain": "2"}, execution_count=2)])
    nb_path = tmp_path / "01_exercises.ipynb"
    discussion = new_markdown_cell("```{admonition} Discussion\n:class: dropdown\n\nIt is **42**.\n```")
    cells = [new_markdown_cell("**Exercise 1.1.** Predict."), solution, discussion, shown]
    nbformat.write(new_notebook(cells=cells), nb_path)
    html = build_report(read_audited(tmp_path), "T", [nb_path], generated="now").read_text(encoding="utf-8")
    folded = re.search(r'<details class="solution"><summary>solution</summary>(.*?)</details>\s*<details class="code">',
                       html, re.S)
    assert folded and "answer = 6 * 7" in folded.group(1) and "<pre>42</pre>" in folded.group(1)
    assert "sweep: 100%" not in html and html.count('<details class="solution">') == 1
    discussion = '<details class="directive admonition"><summary>Discussion</summary><p>It is <strong>42</strong>.</p>'
    assert discussion in html
    assert "<pre>2</pre>" in html and "<pre>2</pre>" not in folded.group(1)  # the next cell is not folded with it


EDGES_MD = textwrap.dedent(
    r"""
    # Edges of $x$ and {term}`a term <Term>`

    Prices stay text: $5 and $10 today.

    Escaped \$y\$ and `$z$` too; $$a+b$$ is display math inline.

    - In a list:

      $$c = d$$ (eq-listed)

    $$
    e

    f
    $$

    ```{admonition} Box
    See {eq}`eq-listed`, {numref}`Figure <fig-one>` and {ref}`target`.
    ```
    """
)


def test_report_keeps_myst_edges_as_the_book_reads_them(tmp_path: Path) -> None:
    """What the MyST plugins could read differently: dollars that are prices, escaped or code stay text; inline $$
    is unnumbered display math; a labelled equation in a list is numbered and a directive's {eq} links to it; a
    blank line ends a $$ block; a heading's math and roles reach the contents."""
    path = tmp_path / "03_edges.ipynb"
    nbformat.write(new_notebook(cells=[new_markdown_cell(EDGES_MD)]), path)
    html = build_report(read_audited(tmp_path), "T", [path], generated="now").read_text(encoding="utf-8")
    assert "Prices stay text: $5 and $10 today." in html and "Escaped $y$ and <code>$z$</code> too;" in html
    assert re.search(r'too; <math [^>]*display="block"><mrow><mi>a</mi><mo>[^<]+</mo><mi>b</mi></mrow></math> is', html)
    assert re.search(r'<div class="equation" id="equation-eq-listed"><math [^>]*display="block">.*?'
                     r'<span class="eqno">\(3\.1\)</span></div>', html, re.S)
    assert re.search(r'See <a href="#equation-eq-listed"[^>]*>\(3\.1\)</a>, Figure and target\.', html)
    assert "<p>$$\ne</p>" in html and "<p>f\n$$</p>" in html
    heading = re.search(r'<li><a href="#ch-03-edges">(.*?)</a></li>', html)
    assert heading and re.fullmatch(r'Edges of <math [^>]*display="inline"><mrow><mi>x</mi></mrow></math> and a term',
                                    heading.group(1))
