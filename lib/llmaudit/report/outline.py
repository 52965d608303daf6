"""The report's outline: every third-level heading, table and figure gets an id (so any of them can be linked), and
the table of contents lists each top-level section with its third-level headings under it."""

from __future__ import annotations

import re
from dataclasses import dataclass
from html import escape

from llmaudit.report.anchors import slug, unique
from llmaudit.report.figure_markup import text_of

_H3 = re.compile(r'<h3(?: id="([^"]*)")?>(.*?)</h3>', re.S)
_UNNAMED = re.compile(r"<(table|figure)\b(?![^>]*\bid=)")


@dataclass(frozen=True)
class Entry:
    """A top-level section of the page as the contents list it: its id, title (HTML) and flag (HTML, may be '')."""

    anchor: str
    title: str
    flag: str = ""


def with_ids(html: str, prefix: str, taken: set[str]) -> tuple[str, list[tuple[str, str]]]:
    """`html` with an id on every h3 (kept where it has one), table and figure; and its h3s as (id, plain text)."""
    found: list[tuple[str, str]] = []

    def heading(m: re.Match[str]) -> str:
        text = text_of(m[2])
        anchor = m[1] or unique(f"{prefix}-{slug(text)}", taken)
        found.append((anchor, text))
        return f'<h3 id="{anchor}">{m[2]}</h3>'

    html = _H3.sub(heading, html)
    html = _UNNAMED.sub(lambda m: f'<{m[1]} id="{unique(f"{prefix}-{m[1]}", taken)}"', html)
    return html, found


def contents(entries: list[tuple[Entry, list[tuple[str, str]]]]) -> str:
    """The two-level table of contents: each section, its third-level headings under it."""
    items = []
    for entry, headings in entries:
        sub = "".join(f'<li><a href="#{anchor}">{escape(text)}</a></li>' for anchor, text in headings)
        items.append(f'<li><a href="#{entry.anchor}">{entry.title}</a>{entry.flag}'
                     + (f"<ol>{sub}</ol>" if sub else "") + "</li>")
    return '<nav class="toc"><h2>Contents</h2><ol>\n' + "\n".join(items) + "\n</ol></nav>"
