"""A setting handed to this process's code and the chapters' kernels it starts (they inherit its environment) for the
length of a block: the dry run's planning, the offline rebuild's request ledger."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def exported(name: str, value: str) -> Iterator[None]:
    """Within it, environment variable `name` is `value`; afterwards it is as it was (unset where it was unset)."""
    before = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = before
