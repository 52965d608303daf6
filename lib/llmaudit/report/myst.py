"""Untrusted text (strings and SVG read from report folders) made inert for a MyST page of the book: nothing it
holds can start a directive, role, fence, heading, table cell or live tag, whatever its newlines."""

from __future__ import annotations

import re

_MARKDOWN_SYNTAX = re.compile(r"([\\`*_\[\]{}|~$^#:])")  # emphasis, code, links, roles, cells, math, headings


def literal(text: str) -> str:
    """`text` as literal inline text of a MyST page (a table cell too): every line break (any Unicode one) a space,
    Markdown syntax backslash-escaped (so '|' cannot end a cell), HTML special characters as entities (so no tag is
    live)."""
    escaped = _MARKDOWN_SYNTAX.sub(r"\\\1", " ".join(str(text).splitlines()))
    return escaped.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def raw_html(html: str) -> str:
    """Sanitised HTML (an SVG figure) as one raw HTML block of a MyST page: on a single line inside a <div>, so that
    no line of it (text or attribute values from a report folder) is read as Markdown or MyST."""
    return "<div>\n" + " ".join(html.splitlines()) + "\n</div>"
