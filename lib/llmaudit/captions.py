"""Numbered captions, which both renderers number the same way: a figure's or a table's caption and an exercise are
MyST directives labelled by `:name:`, numbered per chapter in reading order ("Table 3.1") and cited with {numref}."""

from __future__ import annotations

KINDS = {"figure-caption": "figure", "table-caption": "table", "exercise": "exercise"}  # directive -> what it numbers
WORDS = {"figure": "Figure", "table": "Table", "exercise": "Exercise"}  # how a number reads: "Table 3.1"


def citation(kind: str, number: str | None) -> str:
    """How a {numref} cites a numbered item by default, "Table 3.1" (its kind's word alone where it has no number)."""
    return f"{WORDS[kind]} {number}" if number else WORDS[kind]


def lead(kind: str, number: str | None, title: str = "") -> str:
    """The bold words that open a caption or an exercise: "Figure 1.2." or "Exercise 1.1 (what λ = 0 does).\""""
    return citation(kind, number) + (f" ({title})" if title else "") + "."
