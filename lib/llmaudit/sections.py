"""The typed settings every part of the audit declares for its section of a params file, and the checks they share.
A section is a frozen pydantic model that refuses unknown keys, loose types (a bool for an int, "3" for a number)
and non-finite numbers; a check raises ValueError with a message that `llmaudit.config` turns into one line naming
the key."""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, create_model, field_validator

from llmaudit.terminal import clipped

SEED_LIMIT = 2**32
LAMBDA_LIMIT = 10.0  # |lambda| of a steering coefficient: the vectors are fit at +-1, far beyond it the slope is 0
GRID_LIMIT = 101  # steering coefficients in one grid: the paper sweeps 11; a sweep's cost grows with each one
S = TypeVar("S", bound=Sequence[Any])  # a checked list comes back as the type it came in
F = TypeVar("F", bound=Sequence[float])


class Section(BaseModel):
    """One section of a params file (or the whole file): strict types, no unknown keys, immutable once read."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)

    def complete(self) -> None:
        """ValueError where the section lacks what a run of a chapter that reads it needs (by default nothing)."""


def known(name: str, names: Iterable[str]) -> str:
    """`name` if it is among `names`, else ValueError with the closest suggestion."""
    names = list(names)
    if name not in names:
        close = difflib.get_close_matches(name, names, n=1)
        hint = f"did you mean '{close[0]}'?" if close else f"known: {', '.join(names)}"
        raise ValueError(f"unknown name '{clipped(name)}' ({hint})")
    return name


def once(values: S) -> S:
    """`values` if no value repeats (a grid of coefficients, depths, seeds or chapters), else ValueError."""
    repeated = [v for i, v in enumerate(values) if v in values[:i]]
    if repeated:
        raise ValueError(f"list each value once (repeated: {repeated[0]})")
    return values


def coefficients(values: F) -> F:
    """A grid of steering coefficients: at most GRID_LIMIT (5,001 ran 450 times the shipped sweep), each once and each
    within [-LAMBDA_LIMIT, LAMBDA_LIMIT], else ValueError (a coefficient of 1e30 saturates every steered answer and
    zeroes every slope, so that every test passes)."""
    if len(values) > GRID_LIMIT:
        raise ValueError(f"list at most {GRID_LIMIT} steering coefficients (got {len(values)}): each one is a sweep "
                         "over every case")
    outside = [v for v in once(values) if not -LAMBDA_LIMIT <= v <= LAMBDA_LIMIT]
    if outside:
        raise ValueError(f"steering coefficients must lie in [-{LAMBDA_LIMIT:g}, {LAMBDA_LIMIT:g}] "
                         f"(got {outside[0]:g})")
    return values


def sizes(value: dict[str, int | None], names: Iterable[str], unit: str) -> dict[str, int | None]:
    """A mapping of known names to sizes (None: all, 0: skip, else at least 2 `unit` for an interval), else
    ValueError naming the offending entry."""
    names = list(names)
    for name, size in value.items():
        known(name, names)
        if size is not None and size != 0 and size < 2:
            raise ValueError(f"{name}: need at least 2 {unit} for an interval, or 0 to skip it (got {size})")
    return value


def within(value: float, lo: float, hi: float, shown: str | None = None) -> float:
    """`value` if lo <= value < hi, else ValueError naming the range ([lo, `shown` or hi))."""
    if not lo <= value < hi:
        raise ValueError(f"must be in [{lo:g}, {shown or f'{hi:g}'}) (got {value})")
    return value


def at_least(value: int, low: int, what: str = "") -> int:
    """`value` if it is at least `low`, else ValueError ('must be at least 2 held-out rows (got 1)')."""
    if value < low:
        raise ValueError(f"must be at least {low}{' ' + what if what else ''} (got {value})")
    return value


def numbers_section(name: str, doc: str, defaults: Mapping[str, float], check: Callable[..., float]) -> type[Section]:
    """A section whose keys are declared elsewhere (a chapter's gates, the verdict tests' margins): one float per key
    with its default, each checked by `check` (a pydantic field validator's function)."""
    fields: dict[str, Any] = {key: (float, default) for key, default in defaults.items()}
    return create_model(name, __base__=Section, __doc__=doc,
                        __validators__={"_range": field_validator(*defaults)(check)}, **fields)
