"""The one way report files are written: whole or not at all (a temporary file in the same folder, flushed to disk,
then renamed over the old one), with one file mode, so that a crash, a full disk or a reader at the wrong moment
never sees half a file."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

MODE = 0o644  # every report file: its owner writes, everyone reads (mkstemp alone would leave 0o600)


def write_atomic(path: Path, data: str | bytes) -> Path:
    """Replace `path` by `data` (text as UTF-8, newlines as given; bytes as they are) atomically, creating its folder;
    returns `path`."""
    path = Path(path)
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
