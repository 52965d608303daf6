"""The one way a file of a report folder is read: a regular file only (a FIFO or device would block or stream
forever; it is never read), within a size bound, as UTF-8 text, and its JSON within a nesting bound (a document
nested 200,000 deep exhausts Python's stack in the parser or in whatever walks it next); anything else is a one-line
DataError that names the file and how to get it back."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

from llmaudit.errors import DataError

LIMIT = 2 * 2**30  # bytes: far above any report file the audit writes, below what would exhaust memory
DEPTH = 64  # JSON nesting levels a report file may use: the model card, the deepest, uses 6
LINE = 16 * 2**20  # characters of one line of a JSON-lines file: a case record with its prompts and answers


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


def parse_json(text: str, where: str, fix: str) -> Any:
    """The JSON document `text` (from `where`: a file, or a file and line), nested at most DEPTH levels; a DataError
    ending with `fix` where it is not JSON or nested deeper."""
    try:
        document = json.loads(text)
    except RecursionError:  # the parser's own stack bound, far past DEPTH
        raise DataError(f"{where} is nested deeper than {DEPTH} levels: {fix}") from None
    except ValueError as err:
        raise DataError(f"{where} is not JSON ({' '.join(str(err).split())}): {fix}") from None
    level, open_ = 0, [document]
    while open_:  # breadth first, one level at a time: no recursion, and a bound on the levels walked
        level += 1
        if level > DEPTH:
            raise DataError(f"{where} is nested deeper than {DEPTH} levels: {fix}")
        open_ = [child for node in open_ if isinstance(node, (dict, list))
                 for child in (node.values() if isinstance(node, dict) else node) if isinstance(child, (dict, list))]
    return document


def read_json(path: Path, fix: str, limit: int = LIMIT) -> Any:
    """The JSON document of the regular file `path` (`read_text`, `parse_json`); a FileNotFoundError where it does not
    exist."""
    return parse_json(read_text(path, fix, limit), str(path), fix)


def json_lines(path: Path, fix: str) -> list[tuple[int, Any]]:
    """The JSON document of each non-blank line of the regular file `path`, with its line number; a line longer than
    LINE characters is a DataError naming it. Lines are split at \\n only (text may hold U+2028 or U+0085)."""
    found = []
    for number, line in enumerate(read_text(path, fix).split("\n"), 1):
        if len(line) > LINE:
            raise DataError(f"{path}: line {number} holds {len(line)} characters, more than a line may ({LINE}): {fix}")
        if line.strip():
            found.append((number, parse_json(line, f"{path}: line {number}", fix)))
    return found
