"""The Jupyter Book builds with no warnings and works offline: a book of the root _config.yml and _toc.yml over the
chapters' current sources with the nbval reference notebooks' outputs (the ci chapters, executed) resolves every
glossary term and equation reference, loads no script, style, font or image from the network, and its math is
marked up for a MathJax bundled in the build folder."""

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

from llmaudit.book import offline_problems

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
EQUATION_NUMBER = re.compile(r'<span class="eqno">\(\d+\)')
TERM_LINK = re.compile(r'<a class="reference internal" href="[^"]*glossary\.html#term-[^"]+">')
EQUATION_LINK = re.compile(r'<a class="reference internal" href="#equation-[^"]+">\(\d+\)</a>')
MATHJAX_SCRIPT = re.compile(r'<script[^>]*\bsrc="([^"]*mathjax[^"]*)"', re.I)


class BuiltBook(NamedTuple):
    """A test build: jupyter-book's result, the HTML folder and the chapters' toc paths."""

    result: subprocess.CompletedProcess[str]
    html: Path
    chapters: list[str]


def current_chapter(reference: Path) -> nbformat.NotebookNode:
    """The chapter as its book/ source reads now, each code cell with the outputs of the reference's cell of the same
    source (none where the reference lacks it), so the build checks the current prose over outputs already computed."""
    chapter = jupytext.read(BOOK / f"{reference.stem}.md")
    executed = nbformat.read(reference, as_version=4)
    outputs: dict[str, list] = {}
    for cell in executed.cells:
        if cell.cell_type == "code":
            outputs.setdefault(cell.source, cell.outputs)
    for cell in chapter.cells:
        if cell.cell_type == "code":
            cell.outputs = outputs.get(cell.source, [])
    chapter.metadata = executed.metadata
    return chapter


def write_book(source: Path) -> list[str]:
    """Lay out the root book in `source`: both root config files as they are, the intro and the other pages of book/
    (the glossary) as they are, each chapter as `current_chapter` of its nbval reference notebook, and any other toc
    entry (the audited-models index, which the audit writes) as a small stand-in page; return the chapters' toc
    paths."""
    shutil.copy(ROOT / "_config.yml", source / "_config.yml")
    shutil.copy(ROOT / "_toc.yml", source / "_toc.yml")
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    chapters: list[str] = []
    for entry in [toc["root"], *(entry["file"] for entry in toc["chapters"])]:
        target = source / entry
        target.parent.mkdir(parents=True, exist_ok=True)
        reference = NOTEBOOKS / f"{target.name}.ipynb"
        if reference.exists():
            nbformat.write(current_chapter(reference), target.with_suffix(".ipynb"))
            chapters.append(entry)
        elif (ROOT / entry).parent == BOOK:
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
    """Every chapter links glossary terms, numbers its labelled equations (through the book, as jupyter-book's
    figure numbering does) and cites them by number; no MyST role is left as raw text."""
    glossary = (book.html / "book" / "glossary.html").read_text(encoding="utf-8")
    assert 'id="term-Steering-vector"' in glossary and 'id="term-Sobol-index"' in glossary
    for chapter in book.chapters:
        page = (book.html / f"{chapter}.html").read_text(encoding="utf-8")
        assert TERM_LINK.search(page), chapter
        assert EQUATION_NUMBER.search(page) and EQUATION_LINK.search(page), chapter
        assert "{term}" not in page and "{eq}" not in page, chapter


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
