"""The compute ledger: how many token-blocks (one token through one decoder block) a chapter's forward passes
ran, against the fewest its results need.

Actual: a forward hook on every decoder block adds the token positions it ran on, padding included, so every
engine (the traced forward, the split sweep and its derivative, the prefix cache, sampling) is counted the same
way. Minimum: every distinct token prefix the chapter's prompts contain (two prompts that begin alike share
their beginning's prefixes) once, through as many blocks as its deepest use needs: all of them for a next-token
readout, up to the deepest read block for activations only; and, above a steering edit's block, once more per
distinct edit (each lambda of a sweep, the derivative). What a cached result spares is neither run nor needed."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Hashable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

FOLDER = "ledger"


@dataclass
class Ledger:
    """Token-blocks run and needed by one model's forward passes in one process (one chapter's kernel)."""

    blocks: int
    actual: int = 0
    minimum: int = 0
    path: Path | None = None  # where `account` writes the totals after each accounted call
    _depth: dict[int, int] = field(default_factory=dict, repr=False)  # prefix -> unsteered blocks counted
    _edited: set[tuple[int, Hashable]] = field(default_factory=set, repr=False)  # (prefix, edit) counted above

    def ran(self, tokens: int) -> None:
        """One decoder block ran on `tokens` token positions."""
        self.actual += tokens

    def need(self, encoded: Sequence[Sequence[int]], depth: int | None = None,
             steered: tuple[int, Sequence[Hashable]] | None = None) -> None:
        """The prompts `encoded` need every prefix through `depth` blocks (None: all of them), or, when `steered` =
        (block, edits), through that block unedited and through the blocks above it once per distinct edit."""
        depth = self.blocks if depth is None else depth
        block, edits = steered if steered is not None else (None, ())
        if block is not None:
            depth = block + 1
        for tokens in encoded:
            for prefix in _prefixes(tokens):
                known = self._depth.get(prefix, 0)
                if depth > known:
                    self.minimum += depth - known
                    self._depth[prefix] = depth
                for edit in edits:
                    if (prefix, edit) not in self._edited:
                        self._edited.add((prefix, edit))
                        self.minimum += self.blocks - depth

    @contextmanager
    def account(self, encoded: Sequence[Sequence[int]], depth: int | None = None,
                steered: tuple[int, Sequence[Hashable]] | None = None) -> Iterator[None]:
        """Around one computing call: count what it needs, let it run (the hooks count what it runs), then save."""
        self.need(encoded, depth, steered)
        yield
        self.save()

    def totals(self) -> dict[str, int]:
        """The counts as saved: blocks per token, token-blocks run and the minimum."""
        return {"blocks": self.blocks, "actual": self.actual, "minimum": self.minimum}

    def save(self) -> None:
        """Write the totals to `path` (atomically), when there is one."""
        if self.path is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, partial = tempfile.mkstemp(dir=self.path.parent, prefix=f".{self.path.name}.", suffix=".partial")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(self.totals(), f)
        os.replace(partial, self.path)


def _prefixes(tokens: Sequence[int]) -> Iterator[int]:
    """A hash of each non-empty prefix of a token sequence (prefixes of equal tokens hash equal)."""
    h = 0
    for token in tokens:
        h = hash((h, token))
        yield h


def ledger_path(report_dir: Path, chapter: str) -> Path:
    """reports/<model>/ledger/<chapter>.json."""
    return Path(report_dir) / FOLDER / f"{chapter}.json"


def read_ledgers(report_dir: Path) -> dict[str, dict[str, int]]:
    """The saved totals per chapter (file name order); an unreadable file is left out, since the ledger reports on
    cost and never decides a result."""
    folder = Path(report_dir) / FOLDER
    found = {}
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            totals = json.loads(path.read_text(encoding="utf-8"))
            found[path.stem] = {key: int(totals[key]) for key in ("blocks", "actual", "minimum")}
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return found
