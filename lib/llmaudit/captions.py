"""Numbered captions and exercises, which both renderers number the same way: a figure's or a table's caption is a
MyST directive labelled by `:name:`, an exercise sphinx-exercise's directive labelled by `:label:`; each is numbered
per chapter in reading order ("Table 3.1") and cited with {numref}."""

from __future__ import annotations

KINDS = {"figure-caption": "figure", "table-caption": "table"}  # the book's caption directives -> what they number
EXERCISE = "exercise"  # sphinx-exercise's directive and kind; its solutions open with `solution-start` (`SOLUTION`)
SOLUTION = ("solution-start", "solution-end")  # a gated solution: the cells between them, code cells included
SOLUTION_TAG = "solution"  # a solution's code cell: shown whole inside its folded solution, not folded again
LABELS = {**{directive: "name" for directive in KINDS}, EXERCISE: "label"}  # each numbered directive's label option
WORDS = {"figure": "Figure", "table": "Table", "exercise": "Exercise"}  # how a number reads: "Table 3.1"


def citation(kind: str, number: str | None) -> str:
    """How a {numref} cites a numbered item by default, "Table 3.1" (its kind's word alone where it has no number)."""
    return f"{WORDS[kind]} {number}" if number else WORDS[kind]


def lead(kind: str, number: str | None, title: str = "") -> str:
    """The bold words that open a caption or an exercise: "Figure 1.2." or "Exercise 1.1 (what λ = 0 does).\""""
    return citation(kind, number) + (f" ({title})" if title else "") + "."
