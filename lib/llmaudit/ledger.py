"""The compute ledger: how many token-blocks (one token through one decoder block) a chapter's forward passes
ran, against the fewest its results need.

Actual: a forward hook on every decoder block adds the token positions it ran on, padding included, so every
engine (the traced forward, the split sweep and its derivative, the prefix cache, sampling) is counted the same
way. Minimum: every distinct token prefix the chapter's prompts contain (two prompts that begin alike share
their beginning's prefixes) once, through as many blocks as its deepest use needs: all of them for a next-token
readout, up to the deepest read block for activations only; and, above a steering edit's block, once more per
distinct edit (each lambda of a sweep, the derivative). What a cached result spares is neither run nor needed.
Both counts are also kept per call label (engine and progress description), to show where the excess is, with
the call's wall seconds, which give its rate (token-blocks per second: how near the machine each engine runs)."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Hashable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from llmaudit.atomic import write_atomic
from llmaudit.errors import DataError
from llmaudit.reading import read_json

FOLDER = "ledger"


@dataclass
class Ledger:
    """Token-blocks run and needed by one model's forward passes in one process (one chapter's kernel)."""

    blocks: int
    actual: int = 0
    minimum: int = 0
    path: Path | None = None  # where `account` writes the totals after each accounted call
    calls: dict[str, list[int]] = field(default_factory=dict)  # call label -> [actual, minimum]
    seconds: dict[str, float] = field(default_factory=dict)  # call label -> wall seconds inside its calls
    engine: str | None = None  # which engines run the model and why (`architectures.Engine.reason`)
    _label: str | None = field(default=None, repr=False)  # the label of the call now running (None: none runs)
    _since: float = field(default=0.0, repr=False)  # when the running call's clock last started
    _depth: dict[int, int] = field(default_factory=dict, repr=False)  # prefix -> unsteered blocks counted
    _edited: set[tuple[int, Hashable]] = field(default_factory=set, repr=False)  # (prefix, edit) counted above

    def ran(self, tokens: int) -> None:
        """One decoder block ran on `tokens` token positions."""
        self.actual += tokens
        self._tally()[0] += tokens

    def need(self, encoded: Sequence[Sequence[int]], depth: int | None = None,
             steered: tuple[int, Sequence[Hashable]] | None = None) -> None:
        """The prompts `encoded` need every prefix through `depth` blocks (None: all of them), or, when `steered` =
        (block, edits), through that block unedited and through the blocks above it once per distinct edit."""
        depth = self.blocks if depth is None else depth
        block, edits = steered if steered is not None else (None, ())
        if block is not None:
            depth = block + 1
        before = self.minimum
        for tokens in encoded:
            for prefix in prefix_hashes(tokens):
                known = self._depth.get(prefix, 0)
                if depth > known:
                    self.minimum += depth - known
                    self._depth[prefix] = depth
                for edit in edits:
                    if (prefix, edit) not in self._edited:
                        self._edited.add((prefix, edit))
                        self.minimum += self.blocks - depth
        self._tally()[1] += self.minimum - before

    def spare(self, encoded: Sequence[Sequence[int]], depth: int) -> None:
        """A stored result gives the prompts `encoded` through `depth` blocks: those are neither run nor needed."""
        if depth <= 0:  # nothing given (a sweep from the tokens): no prefix to walk
            return
        for tokens in encoded:
            for prefix in prefix_hashes(tokens):
                self._depth[prefix] = max(self._depth.get(prefix, 0), depth)

    @contextmanager
    def labelled(self, label: str) -> Iterator[None]:
        """Around one computing call: count what runs and is needed inside, and its wall time (a call inside another
        counts as its own, not the outer one's), under `label`, then save."""
        outer = self._label
        self._clock(label)
        try:
            yield
        finally:
            self._clock(outer)
            self.save()

    @contextmanager
    def account(self, encoded: Sequence[Sequence[int]], depth: int | None = None,
                steered: tuple[int, Sequence[Hashable]] | None = None, label: str = "unlabelled") -> Iterator[None]:
        """Around one computing call whose prompts are known before it runs: count what it needs, let it run (the
        hooks count what it runs), then save."""
        with self.labelled(label):
            self.need(encoded, depth, steered)
            yield

    def totals(self) -> dict:
        """The counts as saved: blocks per token, token-blocks run and the minimum, both per call label, and which
        engines ran the model and why."""
        calls = {label: {"actual": actual, "minimum": minimum, "seconds": round(self.seconds.get(label, 0.0), 3)}
                 for label, (actual, minimum) in self.calls.items()}
        return {"blocks": self.blocks, "actual": self.actual, "minimum": self.minimum, "calls": calls} | \
            ({"engine": self.engine} if self.engine is not None else {})

    def save(self) -> None:
        """Write the totals to `path` (atomically), when there is one."""
        if self.path is None:
            return
        write_atomic(self.path, json.dumps(self.totals()))

    def _clock(self, label: str | None) -> None:
        """Charge the time since the running call's clock started to it, and run `label` (None: no call)."""
        now = time.perf_counter()
        if self._label is not None:
            self.seconds[self._label] = self.seconds.get(self._label, 0.0) + now - self._since
        self._label, self._since = label, now

    def _tally(self) -> list[int]:
        """[actual, minimum] of the call now running (blocks run outside every call count as unlabelled)."""
        return self.calls.setdefault(self._label or "unlabelled", [0, 0])


def call_label(engine: str, desc: str | None) -> str:
    """A call's label in the ledger: its engine and, when it shows progress, what the bar says."""
    return engine if desc is None else f"{engine}: {desc}"


def prefix_hashes(tokens: Sequence[int]) -> Iterator[int]:
    """A hash of each non-empty prefix of a token sequence (prefixes of equal tokens hash equal)."""
    h = 0
    for token in tokens:
        h = hash((h, token))
        yield h


def ledger_path(report_dir: Path, chapter: str) -> Path:
    """reports/<model>/ledger/<chapter>.json."""
    return Path(report_dir) / FOLDER / f"{chapter}.json"


def _count(value: Any) -> int:
    """A token-block count as saved: a non-negative integer, else ValueError."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"not a count: {value!r}")
    return value


def _seconds(value: Any) -> float:
    """A call's wall seconds as saved: a finite non-negative number, else ValueError."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < math.inf:
        raise ValueError(f"not a duration: {value!r}")
    return float(value)


def _read(path: Path) -> tuple[dict[str, int], dict[str, dict[str, float]]] | None:
    """One saved ledger, checked (counts non-negative integers, seconds finite): its totals and its counts per call
    label (seconds 0 in a ledger saved before they were kept; no labels in one saved before those were kept); None
    where it is unreadable or damaged, since the ledger reports on cost and never decides a result."""
    try:
        saved = read_json(path, "delete it")
        totals = {key: _count(saved[key]) for key in ("blocks", "actual", "minimum")}
        calls = {str(label): {"actual": _count(counts["actual"]), "minimum": _count(counts["minimum"]),
                              "seconds": _seconds(counts.get("seconds", 0.0))}
                 for label, counts in saved.get("calls", {}).items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError, DataError):
        return None
    return totals, calls


def _saved(report_dir: Path) -> dict[str, tuple[dict[str, int], dict[str, dict[str, float]]]]:
    """Every readable saved ledger of a report folder, by chapter (file name order)."""
    folder = Path(report_dir) / FOLDER
    found = {path.stem: _read(path) for path in sorted(folder.glob("*.json"))} if folder.is_dir() else {}
    return {chapter: ledger for chapter, ledger in found.items() if ledger is not None}


def read_ledgers(report_dir: Path) -> dict[str, dict[str, int]]:
    """The saved totals per chapter (file name order); an unreadable or damaged file is left out."""
    return {chapter: totals for chapter, (totals, _) in _saved(report_dir).items()}


def read_calls(report_dir: Path) -> dict[str, dict[str, dict[str, float]]]:
    """Per chapter, the saved counts per call label ({"actual", "minimum", "seconds"}); chapters without them are left
    out."""
    return {chapter: calls for chapter, (_, calls) in _saved(report_dir).items() if calls}
