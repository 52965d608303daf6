"""Chapter markdown (MyST) as the HTML the report shows, the way the book shows it: CommonMark with tables, math as
MathML (no MathJax, no network), roles ({term}, {eq}, {numref}, ...) and labelled equations read by markdown-it's MyST
plugins (`dollarmath`, `myst_role`), directives as titled boxes, and labelled equations, figure and table captions and
sphinx-exercise's exercises (`llmaudit.captions`) numbered per chapter, cited by {eq} and {numref}; a gated solution's
opening (`solution-start`) is a "Solution to Exercise 2.1" heading and its end marks nothing, since the report renders
cell by cell and folds the solution's code cell itself. The HTML is not yet sanitised: the
page assembly sanitises it with everything else a notebook brings."""

from __future__ import annotations

import re
from collections.abc import Callable
from html import escape
from typing import NamedTuple

from latex2mathml.converter import convert as latex_to_mathml
from markdown_it import MarkdownIt
from markdown_it.rules_core import StateCore
from markdown_it.token import Token
from mdit_py_plugins.dollarmath import dollarmath_plugin
from mdit_py_plugins.myst_role import myst_role_plugin

from llmaudit.captions import EXERCISE, KINDS, LABELS, SOLUTION, citation, lead


class Item(NamedTuple):
    """A labelled item of a markdown cell: its kind ("equation", "figure", "table", "exercise"), its label and
    whether it opens the cell (a figure's caption right under its chart)."""

    kind: str
    label: str
    opens: bool


Numbers = dict[str, tuple[str, str]]  # a label -> its item's kind and number, ("table", "2.1")

_TITLED = re.compile(r"(.*?)\s*<([^<>]+)>", re.S)  # a role's "text <target>" content
_DIRECTIVE = re.compile(r"\{([\w:.-]+)\}\s*(.*)")  # a fence's info string "{name} argument"
_OPTION = re.compile(r":([\w-]+):\s*(.*)")  # a directive's ":key: value" line


def render(source: str, numbers: Numbers | None = None) -> str:
    """A markdown cell as HTML, its labelled items and their {eq} and {numref} citations numbered by `numbers`."""
    return _MD.render(source, {"numbers": numbers or {}})


def render_inline(source: str) -> str:
    """One line of markdown (a heading's text) as inline HTML."""
    return _MD.renderInline(source, {"numbers": {}})


def title(source: str) -> str | None:
    """The text of a markdown cell's first heading, or None where it has none."""
    tokens = _MD.parse(source)
    for opening, inline in zip(tokens, tokens[1:]):
        if opening.type == "heading_open":
            return inline.content
    return None


def items(source: str) -> list[Item]:
    """A markdown cell's labelled display equations, captions and exercises, in reading order."""
    found = []
    for k, token in enumerate(_MD.parse(source)):
        if token.type == "math_block_label":
            found.append(Item("equation", token.info, k == 0))
        elif token.type == "numbered" and token.meta["label"]:
            found.append(Item(token.meta["kind"], token.meta["label"], k == 0))
    return found


def _directives(state: StateCore) -> None:
    """Core rule: a MyST directive, a fence opened by ```{name} argument, becomes a labelled display equation
    ({math}, its :label: option), a `numbered` token (a caption, its :name: option its label, or an exercise, its
    :label:), a `solution` token (a gated solution's start, its argument the exercise's label; its end renders
    empty) or a `directive` token, whose body the renderer parses; other option lines are dropped."""
    for token in state.tokens:
        found = _DIRECTIVE.fullmatch(token.info.strip()) if token.type == "fence" else None
        if found is None:
            continue
        lines = token.content.splitlines()
        options: dict[str, str] = {}
        while lines and (option := _OPTION.fullmatch(lines[0].strip())):
            options[option[1]] = option[2]
            lines.pop(0)
        body = "\n".join(lines).strip()
        if found[1] == "math":
            label = options.get("label")
            token.type, token.content, token.info = ("math_block_label" if label else "math_block"), body, label or ""
        elif found[1] in LABELS:
            token.type, token.content = "numbered", body
            kind = KINDS.get(found[1], EXERCISE)
            token.meta = {"kind": kind, "label": options.get(LABELS[found[1]], ""), "title": found[2]}
        elif found[1] in SOLUTION:
            token.type, token.content, token.info = "solution", "", found[2] if found[1] == SOLUTION[0] else ""
        else:
            folded = "dropdown" in options.get("class", "").split()  # as the book's theme folds it
            token.type, token.content = "directive", body
            token.meta = {"name": found[1], "title": found[2], "folded": folded}


def _demote_headings(state: StateCore) -> None:
    """Core rule: a notebook's `#` heading becomes <h2>, since the report title is the page's only <h1>."""
    for token in state.tokens:
        if token.type in ("heading_open", "heading_close"):
            token.tag = f"h{min(int(token.tag[1]) + 1, 6)}"


def _mathml(latex: str, display: bool) -> str:
    """LaTeX as MathML, which browsers render natively; the source text if it won't convert."""
    try:
        return latex_to_mathml(latex.strip(), display="block" if display else "inline")
    except Exception:  # latex2mathml raises many exception types on unsupported input
        kind = "math display" if display else "math"
        return f'<span class="{kind}">{escape(latex.strip())}</span>'


def _equation(token: Token, env: dict) -> str:
    """A labelled display equation: its anchor, its MathML and its number from env["numbers"]."""
    label, number = token.info, _number(env, token.info)
    shown = f"({number})" if number else ""
    return (f'<div class="equation" id="equation-{escape(label)}">{_mathml(token.content, display=True)}'
            f'<span class="eqno">{shown}</span></div>')


def _number(env: dict, label: str) -> str | None:
    """The number of the item labelled `label`, "2.1", or None where the report has no such item."""
    return env["numbers"].get(label, ("", None))[1]


def _numbered(token: Token, env: dict) -> str:
    """A caption or an exercise: its rendered body, opened by its bold number ("Table 3.1.") as the book opens it."""
    kind, label = token.meta["kind"], token.meta["label"]
    body = _MD.render(token.content, env)
    opening = f"<strong>{escape(lead(kind, _number(env, label), token.meta['title']))}</strong> "
    body = f"<p>{opening}{body[3:]}" if body.startswith("<p>") else f"<p>{opening}</p>{body}"
    return f'<div class="numbered {kind}" id="{kind}-{escape(label)}">{body}</div>'


def _solution(token: Token, env: dict) -> str:
    """A gated solution's start as the book titles it, "Solution to Exercise 2.1" linked to the exercise (its label
    where the report has no such exercise); its end as nothing."""
    if not token.info:
        return ""
    number = _number(env, token.info)
    if number is None:
        return f'<p class="directive-title solution">Solution to {escape(token.info)}</p>'
    link = f'<a href="#{EXERCISE}-{escape(token.info)}">{escape(citation(EXERCISE, number))}</a>'
    return f'<p class="directive-title solution">Solution to {link}</p>'


def _numref(content: str, env: dict) -> str:
    """A {numref} citation as the book shows it: "Table 3.1" (or its own text, its %s the number) linked to the
    item; its text, else its label, where the report has no such item."""
    titled = _TITLED.fullmatch(content)
    text, label = (titled[1], titled[2]) if titled else ("", content)
    if label not in env["numbers"]:
        return escape(text or label)
    kind, number = env["numbers"][label]
    shown = text.replace("%s", number).replace("{number}", number) if text else citation(kind, number)
    return f'<a href="#{kind}-{escape(label)}">{escape(shown)}</a>'


def _role(token: Token, env: dict) -> str:
    """What the book shows for a role: {eq} the equation's number linked to it (its label where the report has no
    such equation), {numref} a caption's or an exercise's, {math} inline math, any other role ({term}, {doc},
    {ref}) its text, linking nowhere."""
    name, content = token.meta["name"], " ".join(token.content.split())
    if name == "eq":
        number = _number(env, content)
        return f'<a href="#equation-{escape(content)}">({number})</a>' if number else f"({escape(content)})"
    if name == "numref":
        return _numref(content, env)
    if name == "math":
        return _mathml(content, display=False)
    titled = _TITLED.fullmatch(content)
    return escape((titled[1] or titled[2]) if titled else content)


def _directive(token: Token, env: dict) -> str:
    """A directive as a titled box around its rendered body, folded where the book folds it (a dropdown, e.g. an
    exercise's discussion); the title is its argument, else its name."""
    name, title = token.meta["name"], token.meta["title"] or token.meta["name"].capitalize()
    body = _MD.render(token.content, env)
    if token.meta["folded"]:
        return f'<details class="directive {escape(name)}"><summary>{escape(title)}</summary>{body}</details>'
    return f'<div class="directive {escape(name)}"><p class="directive-title">{escape(title)}</p>{body}</div>'


def _markdown() -> MarkdownIt:
    """The parser: CommonMark, tables, strikethrough, raw HTML, and MyST's math (`$...$` with no space inside its
    dollars and no digit after them, so prices stay text; `$$...$$` inline or as a block, a block labelled by
    `$$ (label)`), roles and directives."""
    md = MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])
    md.use(dollarmath_plugin, allow_space=False, allow_digits=False, allow_blank_lines=False, double_inline=True)
    md.use(myst_role_plugin)
    md.core.ruler.after("block", "directives", _directives)
    md.core.ruler.push("demote_headings", _demote_headings)
    rules: dict[str, Callable[[Token, dict], str]] = {
        "math_inline": lambda token, env: _mathml(token.content, display=False),
        "math_inline_double": lambda token, env: _mathml(token.content, display=True),
        "math_block": lambda token, env: _mathml(token.content, display=True),
        "math_block_label": _equation,
        "myst_role": _role,
        "numbered": _numbered,
        "solution": _solution,
        "directive": _directive,
    }
    for kind, rule in rules.items():
        md.add_render_rule(kind, lambda self, tokens, i, options, env, rule=rule: rule(tokens[i], env)
                           + ("\n" if tokens[i].block else ""))
    return md


_MD = _markdown()
