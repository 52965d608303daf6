"""A word-level diff of two prompts for the report: both texts HTML-escaped, with the words in which they differ
wrapped in <mark>, so a reader finds the one word (a name, a pronoun, a group) that a black-box pair varies. A prompt
is shown up to LONGEST characters, then its length: the diff's time grows with the square of what it compares, and
the paper's prompts are far shorter."""

from __future__ import annotations

import re
from difflib import SequenceMatcher
from html import escape

_WORDS = re.compile(r"\w+|[^\w\s]+|\s+")  # words, runs of punctuation and runs of whitespace: together, the text
LONGEST = 4000  # characters of a prompt the report shows: room for a whole decision-task prompt and its profile


def _cut(text: str) -> tuple[str, str]:
    """The part of `text` the report shows, and the escaped note on what it leaves out ('' where nothing)."""
    if len(text) <= LONGEST:
        return text, ""
    return text[:LONGEST], escape(f" \u2026 [truncated: {len(text):,} characters, the first {LONGEST:,} shown]")


def shown(text: str) -> str:
    """A prompt as the report shows it: escaped, cut at LONGEST characters with its length."""
    head, note = _cut(text)
    return escape(head) + note


def _tokens(text: str) -> list[str]:
    return _WORDS.findall(text)


def _marked(tokens: list[str]) -> str:
    """Escaped tokens in <mark>, the whitespace around them left outside."""
    text = "".join(tokens)
    core = text.strip()
    if not core:
        return escape(text)
    start = text.index(core)
    return f"{escape(text[:start])}<mark>{escape(core)}</mark>{escape(text[start + len(core):])}"


def word_diff(a: str, b: str) -> tuple[str, str, list[tuple[str, str]]]:
    """Both texts as escaped HTML with their differing words marked, and the changes in order as (words in a, words
    in b) pairs, either side '' where the other inserts words; each text is cut at LONGEST characters (`shown`)."""
    (a, note_a), (b, note_b) = _cut(a), _cut(b)
    left, right = _tokens(a), _tokens(b)
    shown_a, shown_b, changes = [], [], []
    for op, i1, i2, j1, j2 in SequenceMatcher(None, left, right, autojunk=False).get_opcodes():
        if op == "equal":
            shown_a.append(escape("".join(left[i1:i2])))
            shown_b.append(escape("".join(right[j1:j2])))
            continue
        shown_a.append(_marked(left[i1:i2]))
        shown_b.append(_marked(right[j1:j2]))
        change = ("".join(left[i1:i2]).strip(), "".join(right[j1:j2]).strip())
        if any(change):
            changes.append(change)
    return "".join(shown_a) + note_a, "".join(shown_b) + note_b, changes
