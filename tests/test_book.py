"""The Jupyter Book builds with no warnings and works offline: a book of the root _config.yml and _toc.yml over the
chapters' current sources with the nbval reference notebooks' outputs (the ci chapters, executed) resolves every
glossary term and equation reference, numbers chapters and their equations, folds code and leaves stderr out, loads
no script, style, font or image from the network, and its math is marked up for a MathJax bundled in the build
folder. `make book` refuses to build before the audit has written the pages it shows."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

import jupytext
import nbformat
import pytest
import yaml
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from llmaudit.captions import WORDS
from llmaudit.runner.book import offline_problems
from llmaudit.runner.bookreader import alt_texts, fold_code
from llmaudit.runner.contents import DEFAULT_MODEL, chapter_pages, main, table_of_contents

ROOT = Path(__file__).resolve().parents[1]
BOOK = ROOT / "book"  # the repository's own pages: the chapters' sources, the intro, the glossary
NOTEBOOKS = Path(__file__).resolve().parent / "notebooks"
JUPYTER_BOOK = Path(sys.executable).parent / "jupyter-book"
INLINE_MATH = re.compile(r'<span class="math notranslate nohighlight">\\\(.+?\\\)</span>', re.S)
DISPLAY_MATH = re.compile(  # an equation's number, if labelled, then its TeX
    r'<div class="math notranslate nohighlight"[^>]*>\s*(<span class="eqno">.*?</span>)?'
    r"\s*(\\\[|\$\$).+?(\\\]|\$\$)\s*</div>",
    re.S,
)
EQUATION_NUMBER = re.compile(r'<span class="eqno">\((\d+)\.\d+\)')  # (chapter.equation)
TERM_LINK = re.compile(r'<a class="reference internal" href="[^"]*glossary\.html#term-[^"]+">')
EQUATION_LINK = re.compile(r'<a class="reference internal" href="#equation-[^"]+">\(\d+\.\d+\)</a>')
CODE_INPUT = re.compile(r'<div class="cell_input[ "]')
FOLDED_INPUT = re.compile(r'</summary>\s*<div class="cell_input[ "]')  # inside a <details> toggle
CAPTION_LEAD = re.compile(r'<div class="numbered (\w+)" id="[^"]+">\s*<p><strong>(\w+) (\d+)\.(\d+)[ .]')
EXERCISE_LEAD = re.compile(r'<div class="exercise admonition" id="([^"]+)">\s*<p class="admonition-title">'
                           r'<span class="caption-number">Exercise (\d+)\.(\d+) </span>')
SOLUTION_LEAD = re.compile(r'<div class="solution dropdown admonition"[^>]*>\s*<p class="admonition-title">Solution to'
                           r'<a class="reference internal" href="#([^"]+)"> Exercise (\d+\.\d+)')
# a solution's cell, its tags after what it needs of the engine (runner.needs)
SOLUTION_CELL = re.compile(r'<div class="cell (tag_needs-[a-z]+ )*tag_solution[ "]')
NUMREF_LINK = re.compile(r'<a class="reference internal" href="[^"]*#[^"]+"><span class="std std-numref">\w+ \d')
NAV_CHAPTER = re.compile(r'<a class="reference internal" href="[^"]*/(\d\d)_\w+\.html">(\d+)\. ')
PROGRESS = "forward passes: 100%|##########| 4/4 [00:01<00:00,  3.9it/s]\n"  # a tqdm bar as the audit records it
MATHJAX_SCRIPT = re.compile(r'<script[^>]*\bsrc="([^"]*mathjax[^"]*)"', re.I)


class BuiltBook(NamedTuple):
    """A test build: jupyter-book's result, the HTML folder and the chapters' toc paths."""

    result: subprocess.CompletedProcess[str]
    html: Path
    chapters: list[str]


def current_chapter(reference: Path) -> nbformat.NotebookNode:
    """The chapter as its book/ source reads now, each code cell with the outputs of the reference's cell of the same
    source (none where the reference lacks it), so the build checks the current prose over outputs already computed,
    after a progress bar on stderr as the audit's notebooks record it (the references drop stderr)."""
    chapter = jupytext.read(BOOK / f"{reference.stem}.md")
    executed = nbformat.read(reference, as_version=4)
    outputs: dict[str, list] = {}
    for cell in executed.cells:
        if cell.cell_type == "code":
            outputs.setdefault(cell.source, cell.outputs)
    for cell in chapter.cells:
        if cell.cell_type == "code":
            cell.outputs = [new_output("stream", name="stderr", text=PROGRESS), *outputs.get(cell.source, [])]
    chapter.metadata = executed.metadata
    return chapter


def toc_files(entries: list[dict]) -> list[str]:
    """Every file of a toc's parts or chapters, each followed by its sections', in reading order."""
    files: list[str] = []
    for entry in entries:
        files += [entry["file"]] if "file" in entry else []
        files += toc_files(entry.get("chapters", []) + entry.get("sections", []))
    return files


def write_book(source: Path) -> list[str]:
    """Lay out the root book in `source`: both root config files as they are, the intro and the other pages of book/
    (the reference pages, the glossary) as they are, each chapter as `current_chapter` of its nbval reference
    notebook, and any other toc entry (the audited-models index, which the audit writes) as a small stand-in page;
    return the chapters' toc paths. The book's static files (its CSS) come along."""
    shutil.copy(ROOT / "_config.yml", source / "_config.yml")
    shutil.copy(ROOT / "_toc.yml", source / "_toc.yml")
    shutil.copytree(BOOK / "_static", source / "book" / "_static")
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    chapters: list[str] = []
    for entry in [toc["root"], *toc_files(toc["parts"])]:
        target = source / entry
        target.parent.mkdir(parents=True, exist_ok=True)
        reference = NOTEBOOKS / f"{target.name}.ipynb"
        if reference.exists():
            nbformat.write(current_chapter(reference), target.with_suffix(".ipynb"))
            chapters.append(entry)
        elif (ROOT / entry).is_relative_to(BOOK):
            shutil.copy(ROOT / f"{entry}.md", target.with_suffix(".md"))
        else:
            target.with_suffix(".md").write_text("# Audited models\n\nThe audited models side by side.\n")
    return chapters


@pytest.fixture(scope="module")
def book(tmp_path_factory: pytest.TempPathFactory) -> BuiltBook:
    """Build the book once, warnings as errors."""
    source = tmp_path_factory.mktemp("book")
    chapters = write_book(source)
    result = subprocess.run(
        [str(JUPYTER_BOOK), "build", str(source), "--warningiserror", "--keep-going"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    return BuiltBook(result, source / "_build" / "html", chapters)


def test_every_chapter_has_a_reference_notebook_in_the_toc(book: BuiltBook) -> None:
    """Each nbval reference notebook is a chapter of the root toc, so the test book holds the whole book."""
    references = sorted(path.stem for path in NOTEBOOKS.glob("*.ipynb"))
    assert sorted(Path(chapter).name for chapter in book.chapters) == references


def test_book_builds_without_warnings(book: BuiltBook) -> None:
    """jupyter-book exits 0 under -W and writes every chapter's page."""
    assert book.result.returncode == 0, (book.result.stdout + book.result.stderr)[-5000:]
    missing = [chapter for chapter in book.chapters if not (book.html / f"{chapter}.html").is_file()]
    assert not missing


def test_book_loads_nothing_from_the_network(book: BuiltBook) -> None:
    """No page or stylesheet references an external or missing resource; pages with math load a local MathJax."""
    assert book.html.is_dir()
    assert offline_problems(book.html) == []


def test_math_is_marked_up_for_local_mathjax(book: BuiltBook) -> None:
    """The steering chapter's inline and display formulas are wrapped for MathJax, which loads from _static."""
    steering = next(chapter for chapter in book.chapters if Path(chapter).name == "01_steering_vectors")
    page_file = book.html / f"{steering}.html"
    page = page_file.read_text(encoding="utf-8")
    assert INLINE_MATH.search(page)
    assert DISPLAY_MATH.search(page)
    scripts = MATHJAX_SCRIPT.findall(page)
    assert scripts
    for src in scripts:
        script = (page_file.parent / src).resolve()
        assert script.is_file() and script.is_relative_to((book.html / "_static").resolve()), src


def test_chapters_link_terms_and_number_equations(book: BuiltBook) -> None:
    """Every chapter links glossary terms, numbers its labelled equations within the chapter (chapter 2's read
    (2.1), (2.2), ..., as its figures do) and cites them by number; no MyST role is left as raw text."""
    glossary = (book.html / "book" / "glossary.html").read_text(encoding="utf-8")
    assert 'id="term-Steering-vector"' in glossary and 'id="term-Sobol-index"' in glossary
    for chapter in book.chapters:
        page = (book.html / f"{chapter}.html").read_text(encoding="utf-8")
        assert TERM_LINK.search(page), chapter
        assert set(EQUATION_NUMBER.findall(page)) == {str(int(Path(chapter).name[:2]))}, chapter
        assert EQUATION_LINK.search(page), chapter
        assert "{term}" not in page and "{eq}" not in page, chapter


def test_chapters_number_captions_and_exercises(book: BuiltBook) -> None:
    """Each chapter numbers its figures, tables and exercises per kind from 1, after its own number (chapter 2's
    Table 2.1, Table 2.2, ...; lib/llmaudit/runner/bookcaptions.py for captions, sphinx-exercise for exercises),
    follows each exercise with its folded solution titled by the exercise's number and linked to it, and cites them
    by {numref} as links; none is left raw."""
    for chapter in book.chapters:
        page = (book.html / f"{chapter}.html").read_text(encoding="utf-8")
        numbers: dict[str, list[int]] = {}
        for kind, word, number, k in CAPTION_LEAD.findall(page):
            assert word == WORDS[kind] and int(number) == int(Path(chapter).name[:2]), (chapter, word, number)
            numbers.setdefault(kind, []).append(int(k))
        exercises = EXERCISE_LEAD.findall(page)
        assert exercises and all(int(number) == int(Path(chapter).name[:2]) for _, number, _ in exercises), chapter
        numbers["exercise"] = [int(k) for _, _, k in exercises]
        solved = [(label, f"{number}.{k}") for label, number, k in exercises]
        assert SOLUTION_LEAD.findall(page) == solved, chapter
        assert numbers and all(ks == list(range(1, len(ks) + 1)) for ks in numbers.values()), (chapter, numbers)
        assert NUMREF_LINK.search(page), chapter
        assert "{numref}" not in page and "{figure-caption}" not in page and "{solution-" not in page, chapter


def test_navigation_numbers_the_chapters_only(book: BuiltBook) -> None:
    """The side navigation numbers each chapter as its notebook's place in the book (1. Steering vectors) and
    leaves the introduction, the audited-models page (after the chapters), the reference and the glossary
    unnumbered."""
    page = (book.html / "book" / "intro.html").read_text(encoding="utf-8")
    numbered = NAV_CHAPTER.findall(page)
    assert sorted(int(stem) for stem, _ in numbered) == list(range(1, len(book.chapters) + 1))
    assert all(int(stem) == int(number) for stem, number in numbered)
    audited = re.search(r'href="[^"]*reports/index\.html">Audited models</a>', page)
    last_chapter = max(found.end() for found in NAV_CHAPTER.finditer(page))
    assert audited and audited.start() > last_chapter
    assert re.search(r'href="reference/index\.html">Using and extending the audit</a>', page)
    assert re.search(r'href="reference/extending\.html">Extending the audit</a>', page)
    assert re.search(r'href="glossary\.html">Glossary</a>', page)


def test_pages_fold_code_and_leave_stderr_out(book: BuiltBook) -> None:
    """Every chapter's code is folded behind a toggle with its outputs shown, but for the exercises' solution code,
    which shows whole inside its folded solution, and no stderr output (the progress bar every code cell of the
    test book records) reaches a page."""
    for chapter in book.chapters:
        page = (book.html / f"{chapter}.html").read_text(encoding="utf-8")
        solutions = len(SOLUTION_CELL.findall(page))
        assert solutions > 0 and len(FOLDED_INPUT.findall(page)) + solutions == len(CODE_INPUT.findall(page)), chapter
        assert 'class="cell_output' in page, chapter
        assert "forward passes: 100%" not in page and 'class="output stderr' not in page, chapter


def test_fold_code_tags_only_undecided_code_cells() -> None:
    """The book's reader folds a code cell's source unless its tags already hide or remove it, leaves markdown alone
    and keeps every other tag."""
    notebook = new_notebook(cells=[
        new_markdown_cell("# A chapter"),
        new_code_cell("x = 1"),
        new_code_cell("y = 2", metadata={"tags": ["remove-stderr"]}),
        new_code_cell("solution()", metadata={"tags": ["hide-cell"]}),
        new_code_cell("setup()", metadata={"tags": ["hide-input"]}),
        new_code_cell("params = 0", metadata={"tags": ["parameters", "remove-cell"]}),
    ])
    tags = [cell.metadata.get("tags") for cell in fold_code(notebook).cells]
    assert tags == [None, ["hide-input"], ["remove-stderr", "hide-input"], ["hide-cell"], ["hide-input"],
                    ["parameters", "remove-cell"]]


def test_contents_stop_until_the_audit_wrote_the_pages(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Without the audited-models page or the default model's executed chapters, writing the toc (make book's first
    step) fails with one line saying to run `make audit`, and writes nothing; with them, it writes the toc."""
    toc = tmp_path / "_toc.yml"
    assert main([str(toc)]) == 1
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "run `make audit` first" in error and "reports/index.md" in error
    assert not toc.exists()
    (tmp_path / "reports" / DEFAULT_MODEL).mkdir(parents=True)
    (tmp_path / "reports" / "index.md").write_text("# Audited models\n")
    assert main([str(toc)]) == 1 and not toc.exists()  # the chapters are still missing
    assert "run `make audit` first" in capsys.readouterr().err
    for page in chapter_pages():
        (tmp_path / f"{page}.ipynb").write_text("{}")
    assert main([str(toc)]) == 0
    assert toc.read_text(encoding="utf-8") == table_of_contents()
    toc.unlink()
    (tmp_path / "reports" / "index.md").unlink()
    assert main([str(toc), "--toc-only"]) == 0  # after registering a chapter, with no audit at hand
    assert toc.read_text(encoding="utf-8") == table_of_contents()


def test_offline_check_catches_network_resources(tmp_path: Path) -> None:
    """The checker flags CDN scripts, protocol-relative styles, external CSS fonts, paths out of the build folder,
    missing files, math without a local MathJax and a CHTML MathJax without its fonts, and lets external hyperlinks,
    data: URLs and local files through."""
    (tmp_path / "_static" / "mathjax").mkdir(parents=True)
    (tmp_path / "_static" / "local.js").write_text("")
    (tmp_path / "_static" / "mathjax" / "tex-chtml.js").write_text("")
    (tmp_path / "_static" / "font.css").write_text(
        '@font-face { src: url("https://fonts.example.org/a.woff2"); } .x { background: url("data:image/png;a(b)"); }'
    )
    (tmp_path / "page.html").write_text(
        '<link rel="stylesheet" href="//cdn.example.org/theme.css"><script src="_static/local.js"></script>'
        '<script src="https://cdn.jsdelivr.net/npm/mathjax@3/es5/tex-mml-chtml.js"></script>'
        '<img src="../outside.png"><img src="_static/gone.png"><a href="https://example.org/paper">a paper</a>'
        '<span class="math notranslate nohighlight">\\(x\\)</span>'
    )
    (tmp_path / "fontless.html").write_text(
        '<script src="_static/mathjax/tex-chtml.js"></script><div class="math notranslate nohighlight">\\[x\\]</div>'
    )
    problems = offline_problems(tmp_path)
    assert problems == [
        "_static/font.css: external url(https://fonts.example.org/a.woff2)",
        "fontless.html: _static/mathjax/tex-chtml.js without its fonts folder output/chtml/fonts",
        "page.html: external //cdn.example.org/theme.css",
        "page.html: external https://cdn.jsdelivr.net/npm/mathjax@3/es5/tex-mml-chtml.js",
        "page.html: outside the build folder ../outside.png",
        "page.html: missing _static/gone.png",
        "page.html: math but no local MathJax script",
    ]


def test_charts_take_their_captions_as_alt_text() -> None:
    """A chart's alt text is its figure caption's first sentences as plain words (myst-nb's default is the image
    file's path); a chart without a caption below it is named by its cell's first comment; text outputs get none."""
    svg = new_output("display_data", data={"image/svg+xml": "<svg/>", "text/plain": "<SVGFigure>"})
    caption = ("```{figure-caption}\n:name: fig-x\n\nEach task's *slope* against $\\lambda$, as in {numref}`tab-y` "
               "and {numref}`Table %s <tab-z>`. A second sentence. A third one.\n```")
    notebook = new_notebook(cells=[
        new_code_cell("show(chart)", outputs=[svg]), new_markdown_cell(caption),
        new_code_cell("# the sweep by task\nshow(other)", outputs=[svg]), new_markdown_cell("Prose."),
        new_code_cell("table", outputs=[new_output("execute_result", data={"text/plain": "1"}, execution_count=1)]),
    ])
    alts = [cell.metadata.get("mystnb", {}).get("image", {}).get("alt") for cell in alt_texts(notebook).cells]
    assert alts == ["Each task's slope against lambda, as in tab-y and Table. A second sentence.", None,
                    "Figure: the sweep by task", None, None]


def test_printed_output_and_wide_tables_stay_in_the_column(book: BuiltBook) -> None:
    """Every chapter page loads the book's stylesheet, which wraps printed output (a settings line, a prompt) inside
    the text column and wraps a wide table's cells there instead of scrolling it (Table 2.1 scrolled 1,457 px, its
    dependence columns out of view)."""
    css = (book.html / "_static" / "book.css").read_text(encoding="utf-8")
    assert re.search(r"div\.cell_output div\.output pre \{[^}]*white-space: pre-wrap;", css)
    table = re.search(r"div\.cell_output table\.dataframe \{([^}]*)\}", css)
    assert table is not None and "display: table;" in table[1] and "overflow" not in table[1]
    assert re.search(r"table\.dataframe :is\(th, td\) \{[^}]*overflow-wrap: anywhere;", css)
    for chapter in book.chapters:
        assert re.search(r'<link rel="stylesheet"[^>]*href="[^"]*_static/book\.css',
                         (book.html / f"{chapter}.html").read_text(encoding="utf-8")), chapter
