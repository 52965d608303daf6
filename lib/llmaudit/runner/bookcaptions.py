"""The book's numbered captions (a Sphinx extension, listed in _config.yml): the {figure-caption} and {table-caption}
directives of `llmaudit.captions` as paragraphs opened by their number, which Sphinx's numfig counts per chapter
under the figure and table kinds, so {numref} cites them from any chapter. Exercises and their solutions are
sphinx-exercise's, numbered under its exercise kind the same way."""

from __future__ import annotations

from html import escape

from docutils import nodes
from docutils.parsers.rst import directives
from sphinx.application import Sphinx
from sphinx.config import Config
from sphinx.util.docutils import SphinxDirective
from sphinx.writers.html5 import HTML5Translator

from llmaudit.captions import KINDS, WORDS, lead


class numbered(nodes.General, nodes.Element):  # noqa: N801 (docutils names node classes in lower case)
    """A caption: its paragraphs, with its kind, its title and its label as ids."""


# numfig counts a node under its class's kind, so each kind has its own class.
class figure_caption(numbered):  # noqa: N801
    """A figure's caption."""


class table_caption(numbered):  # noqa: N801
    """A table's caption."""


NODES: dict[str, type[numbered]] = {"figure": figure_caption, "table": table_caption}


class number_lead(nodes.Inline, nodes.Element):  # noqa: N801
    """Where the bold "Figure 1.2." goes: at the start of the caption's first paragraph."""


class Numbered(SphinxDirective):
    """```{figure-caption} or ```{table-caption}, with a `:name:` label and markdown content."""

    optional_arguments = 1
    final_argument_whitespace = True
    has_content = True
    option_spec = {"name": directives.unchanged_required}

    def run(self) -> list[nodes.Node]:
        kind = KINDS[self.name]
        node = NODES[kind](kind=kind, title=self.arguments[0] if self.arguments else "")
        self.set_source_info(node)
        self.add_name(node)
        self.state.nested_parse(self.content, self.content_offset, node)
        first = node[0] if node.children else None
        if not isinstance(first, nodes.paragraph):
            first = nodes.paragraph()
            node.insert(0, first)  # the number opens a paragraph of its own, as in the report
        first.insert(0, number_lead())
        return [node]


def _title(node: numbered) -> str:
    """What numfig needs to count the caption and {numref}'s {name} shows: its title, else its text."""
    return node["title"] or node.astext()


def _visit(self: HTML5Translator, node: numbered) -> None:
    """Open the item's <div>, its label as id."""
    self.body.append(self.starttag(node, "div", CLASS=f"numbered {node['kind']}"))


def _depart(self: HTML5Translator, node: numbered) -> None:
    """Close the item's <div>."""
    self.body.append("</div>\n")


def _visit_lead(self: HTML5Translator, node: number_lead) -> None:
    """The item's bold lead, "Table 3.1.", its number from numfig (none where the page is unnumbered)."""
    item = node.parent.parent
    found = self.builder.fignumbers.get(item["kind"], {}).get(item["ids"][0]) if item["ids"] else None
    number = ".".join(map(str, found)) if found else None
    self.body.append(f"<strong>{escape(lead(item['kind'], number, item['title']))}</strong> ")
    raise nodes.SkipNode


def _formats(app: Sphinx, config: Config) -> None:
    """{numref}'s default text per kind, "Table %s", as the captions and exercises read."""
    config.numfig_format = {**config.numfig_format, **{kind: f"{word} %s" for kind, word in WORDS.items()}}


def setup(app: Sphinx) -> dict[str, object]:
    """Register the directives, their nodes (numfig counts them as figures and tables) and their HTML."""
    for kind, node in NODES.items():
        # Sphinx types the title getter for any node; it calls it on nodes of the class registered with it only
        app.add_enumerable_node(node, kind, _title, html=(_visit, _depart))  # type: ignore[arg-type]
    app.add_node(number_lead, html=(_visit_lead, None))
    for name in KINDS:
        app.add_directive(name, Numbered)
    app.connect("config-inited", _formats)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
