"""Optional results that a call guarantees: an engine's output fields are None where a pass was not asked for them,
and a caller that asked reads them through `required`, which names what is missing instead of failing later."""

from __future__ import annotations

from typing import TypeVar

T = TypeVar("T")


def required(value: T | None, what: str) -> T:
    """`value`, which the call that made it was asked to compute; a clear error naming `what` where it is None."""
    if value is None:
        raise ValueError(f"{what} missing: the pass that made them was not asked for them")
    return value
