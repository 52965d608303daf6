"""The one way report files are written: whole or not at all (a temporary file in the same folder, flushed to disk,
then renamed over the old one), with one file mode, so that a crash, a full disk or a reader at the wrong moment
never sees half a file; and the one way a lock file is opened. A FIFO, device or folder where a file goes is refused
with a one-line DataError before anything opens it for writing (opening a FIFO blocks until a reader comes)."""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path
from typing import TextIO

from llmaudit.errors import DataError

MODE = 0o644  # every report file: its owner writes, everyone reads (mkstemp alone would leave 0o600)


def write_atomic(path: Path, data: str | bytes) -> Path:
    """Replace `path` by `data` (text as UTF-8, newlines as given; bytes as they are) atomically, creating its folder;
    returns `path`."""
    path = Path(path)
    writable(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, partial = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".partial")
    try:
        with os.fdopen(fd, "wb") as f:
            os.fchmod(f.fileno(), MODE)
            f.write(data.encode("utf-8") if isinstance(data, str) else data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(partial, path)
    except BaseException:
        Path(partial).unlink(missing_ok=True)
        raise
    return path


def open_lock(path: Path) -> TextIO:
    """`path` opened for reading and appending as a lock file (created where missing); never blocks on opening,
    and a DataError where it is not a regular file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_NONBLOCK, MODE)
    try:
        _refuse(path, os.fstat(fd).st_mode)
    except DataError:
        os.close(fd)
        raise
    return os.fdopen(fd, "a+", encoding="utf-8")


def writable(path: Path) -> Path:
    """`path`, where it is missing or a regular file (what a writer may replace); else a DataError, without
    opening it."""
    try:
        _refuse(path, os.stat(path).st_mode)
    except FileNotFoundError:
        pass
    return path


def _refuse(path: Path, mode: int) -> None:
    """A DataError where `mode` is not a regular file's: `path` is a FIFO, device, socket or folder."""
    if not stat.S_ISREG(mode):
        raise DataError(f"{path} is not a regular file: remove it (the audit writes a file there) or choose another "
                        "path")
