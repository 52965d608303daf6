"""The values each declared unit of a result can take: a results row whose unit is bounded (a probability, a share,
a rate or a difference of two, a correlation, a Sobol' index, a bounded score, a count) has its value and its
interval within that range, and `Chapter.record` refuses any other. Every unit a chapter declares is listed here
(None: no bound, a slope or a projection), so a new unit says whether it has a range."""

from __future__ import annotations

import math
from numbers import Real

Range = tuple[float, float]

UNIT = (0.0, 1.0)  # a probability, a share, a rate
DIFFERENCE = (-1.0, 1.0)  # one such minus another, a correlation, a cosine
COUNT = (0.0, math.inf)

RANGES: dict[str, Range | None] = {
    "probability": UNIT,
    "probability difference": (-2.0, 2.0),  # a difference of two differences of probabilities
    "share": UNIT,
    "share of answers": UNIT,
    "share of cells": UNIT,
    "share of questions": UNIT,
    "share of templates": UNIT,
    "accuracy minus chance (1/3)": (-1 / 3, 2 / 3),
    "accuracy minus chance, or r with the decisive fact": DIFFERENCE,
    "FPR difference": DIFFERENCE,
    "metric difference": DIFFERENCE,  # every metric a verdict test reads is a rate in [0, 1] (report/effects.py)
    "bad credit rate difference": DIFFERENCE,
    "Pearson r": DIFFERENCE,
    "cosine": DIFFERENCE,
    "linear CKA": UNIT,
    "Sobol' index difference": DIFFERENCE,  # two first-order indices, each in [0, 1]
    "score from 0 to 1": UNIT,
    "score from 0 to 100": (0.0, 100.0),
    "score from -100 to 100": (-100.0, 100.0),
    "score from -200 to 200": (-200.0, 200.0),
    "answers": COUNT,
    "cells": COUNT,
    "rows": COUNT,
    "block index": COUNT,
    "bad credit rate per p_f": None,
    "metric per unit concept score": None,
    "metric per unit lambda": None,
    "metric per unit of the vector's coordinate": None,
    "normalised score": None,
    "penalty": None,
    "projection on race_dial": None,
    "projection per score unit": None,
    "relative shift": None,
    "setting": None,
    "yes/no": None,  # a flag, never a value
}
SLACK = 1e-6  # float32 rounding: a probability summed in float32 may end a few 1e-7 past 1


def outside(unit: str, **numbers: object) -> list[str]:
    """The numbers (value, lo, hi) that lie outside `unit`'s range, as 'lo = -1.14'; none where
    the unit is unbounded or unlisted, or the number missing."""
    bounds = RANGES.get(unit)
    if bounds is None:
        return []
    low, high = bounds
    given = {part: float(x) for part, x in numbers.items() if isinstance(x, Real)}
    return [f"{part} = {x:g}" for part, x in given.items()
            if not math.isnan(x) and not low - SLACK <= x <= high + SLACK]
