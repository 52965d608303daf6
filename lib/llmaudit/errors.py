"""The one exception type the audit raises for bad input: its message is a single line saying what to fix."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import NoReturn


class AuditError(Exception):
    """A user-facing error: bad params, unknown model, missing or corrupt data."""


class DataError(AuditError):
    """A data file is missing, corrupt (sha256 mismatch) or has the wrong columns."""


class ConfigError(AuditError):
    """A params file is malformed or names an unknown key or model."""


def run_script(main: Callable[[], int], name: str) -> NoReturn:
    """Exit with a script's `main()` status; an AuditError as one line naming the script, exit status 2."""
    try:
        sys.exit(main())
    except AuditError as err:
        print(f"{name}: error: {err}", file=sys.stderr)
        sys.exit(2)
