"""One number format per quantity, shared by every page that prints a number (report, index, terminal): a score or
an interval bound is signed with 4 decimals (+0.0064), a count is whole, any other value has 3 significant digits,
and a missing value is an em dash, never NaN."""

from __future__ import annotations

import math

MISSING = "—"  # what every table prints for a value that was not measured


def missing(x: object) -> bool:
    """Whether `x` is no number: None, NaN or pandas' missing value."""
    if x is None:
        return True
    try:
        return math.isnan(float(x))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return str(x) == "<NA>"


def signed(x: object) -> str:
    """A score or an interval bound: '+0.0064', '—' when missing."""
    return MISSING if missing(x) else f"{float(x):+.4f}"  # type: ignore[arg-type]


def interval(lo: object, hi: object) -> str:
    """A 95% interval: '[-0.5210, +0.0064]', '—' when a bound is missing."""
    return MISSING if missing(lo) or missing(hi) else f"[{signed(lo)}, {signed(hi)}]"


def estimate(value: object, lo: object, hi: object) -> str:
    """A score with its interval: '+0.1190 [+0.0800, +0.1600]' (the interval left out when it is missing)."""
    bounds = interval(lo, hi)
    return signed(value) if bounds == MISSING else f"{signed(value)} {bounds}"


def count(n: object) -> str:
    """A number of units: '80', '—' when missing."""
    return MISSING if missing(n) else f"{int(float(n)):d}"  # type: ignore[arg-type]


def number(x: object) -> str:
    """Any other value: numbers to 3 significant digits (whole past 10^4), text as recorded, '—' when missing."""
    if missing(x):
        return MISSING
    if isinstance(x, (int, float)) and not isinstance(x, bool):
        return f"{x:.3g}" if abs(x) < 1e4 else f"{x:.0f}"
    return str(x)
