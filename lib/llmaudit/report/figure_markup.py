"""Accessible figures: each chart's SVG is one image with one label (role="img", aria-label: its caption, else its
title) instead of hundreds of marks each announced by a screen reader, and a chart and the caption under it are one
<figure> with its <figcaption>, which carries the caption's id, so a link to "Figure 2.1" lands on the chart."""

from __future__ import annotations

import re
from html import escape, unescape

_ROOT = re.compile(r"<svg\b([^>]*)>")
_MARK_ARIA = re.compile(r'\s(?:role|aria-roledescription|aria-label|aria-hidden)="[^"]*"')
_TITLE = re.compile(r"role-title\b.*?<text[^>]*>(.*?)</text>", re.S)
_LABEL = re.compile(r'(<svg\b[^>]*\baria-label=|<img\b[^>]*\balt=)"[^"]*"')
_TAGS = re.compile(r"<[^>]+>")
_CAPTION = re.compile(r'\s*<div class="numbered figure" id="([^"]+)">(.*?)</div>', re.S)
_OPENING = re.compile(r"<p><strong>.*?</strong>", re.S)
_NO_DATA = re.compile(r'<figure class="no-data"><p>([^<]*)</p></figure>$')  # its sentence is escaped: no '<'


def text_of(html: str) -> str:
    """The plain text of a piece of HTML, whitespace collapsed."""
    return " ".join(unescape(_TAGS.sub(" ", html)).split())


def chart_title(svg: str) -> str:
    """The title vega drew at the top of a chart, or '' where it has none."""
    found = _TITLE.search(svg)
    return text_of(found[1]) if found else ""


def accessible(svg: str, label: str) -> str:
    """`svg` with the ARIA roles and labels of its marks removed and its root an image labelled `label`."""
    inner = _MARK_ARIA.sub("", svg)
    return _ROOT.sub(lambda m: f'<svg{m[1]} role="img" aria-label="{escape(label)}">', inner, count=1)


def relabel(chart: str, label: str) -> str:
    """A chart's SVG (its aria-label) or image (its alt text) labelled `label`."""
    return _LABEL.sub(lambda m: f'{m[1]}"{escape(label)}"', chart, count=1)


def with_captions(parts: list[str]) -> list[str]:
    """The rendered cells of a chapter with each chart (a `<figure>` part) joined to the figure caption that opens the
    part after it: one <figure id=...> holding the chart labelled by its caption and the <figcaption>. A figure with
    nothing to plot (`<figure class="no-data">`) keeps only its number and the sentence saying why: its caption
    describes marks that are not there."""
    joined: list[str] = []
    for part in parts:
        previous = joined[-1].rstrip() if joined else ""
        start, caption = previous.rfind("<figure>"), _CAPTION.match(part)
        empty = _NO_DATA.search(previous)
        if (start < 0 and empty is None) or not previous.endswith("</figure>") or caption is None:
            joined.append(part)
            continue
        if empty is not None:
            opening = _OPENING.match(caption[2].strip())
            figure = (f'<figure id="{caption[1]}" class="no-data"><figcaption>'
                      f'{opening[0] if opening else "<p>"} {empty[1]}</p></figcaption></figure>')
            joined[-1] = previous[:empty.start()] + figure
        else:
            chart = relabel(previous[start + len("<figure>"):-len("</figure>")], text_of(caption[2]))
            joined[-1] = previous[:start] + (f'<figure id="{caption[1]}">{chart}<figcaption>{caption[2]}'
                                             "</figcaption></figure>")
        rest = part[caption.end():].strip()
        if rest:
            joined.append(rest)
    return joined
