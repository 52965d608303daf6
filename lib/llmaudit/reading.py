"""The one way a file of a report folder is read: a regular file only (a FIFO or device would block or stream
forever; it is never read), within a size bound, as UTF-8 text; anything else is a one-line DataError that names
the file and how to get it back."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from llmaudit.errors import DataError

LIMIT = 2 * 2**30  # bytes: far above any report file the audit writes, below what would exhaust memory


def read_text(path: Path, fix: str, limit: int = LIMIT) -> str:
    """The UTF-8 text of the regular file `path`; a FileNotFoundError where it does not exist, and a DataError ending
    with `fix` where it is not a regular file, is larger than `limit` bytes, unreadable or not UTF-8."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # opening a FIFO without a writer returns at once
    except FileNotFoundError:
        raise
    except OSError as err:
        raise DataError(f"{path} is unreadable ({err.strerror or err}): {fix}") from None
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise DataError(f"{path} is not a regular file: {fix}")
        if info.st_size > limit:
            raise DataError(f"{path} holds {info.st_size} bytes, more than a report file may ({limit}): {fix}")
        try:
            data = handle.read(limit + 1)
        except OSError as err:
            raise DataError(f"{path} is unreadable ({err.strerror or err}): {fix}") from None
    if len(data) > limit:
        raise DataError(f"{path} holds more bytes than a report file may ({limit}): {fix}")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise DataError(f"{path} is not UTF-8 text (byte {err.start}): {fix}") from None
