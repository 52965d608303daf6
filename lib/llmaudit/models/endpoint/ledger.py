"""The request ledger: every exchange with the endpoint as one JSON line of `<report>/requests/<chapter>.jsonl`
(the body sent, which never holds the key, the reply, status, latency, retries, `system_fingerprint`, version headers,
date), written and flushed in the order asked as replies arrive (requests go out concurrently). The same lines are the
cache: an exchange is found again by a key over everything that can change an answer (the endpoint, the model's name
there, the fingerprint the server gave at the start, the whole body with its every sampling parameter and seed, the
sample's index), so a killed audit resumes asking nothing twice, whichever chapter asked first."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Any

from llmaudit.errors import DataError

FOLDER = "requests"


def request_key(*, endpoint: str, model: str, fingerprint: str | None, body: dict[str, Any], sample: int) -> str:
    """The cache key of one request: sha256 of every field that can change its answer."""
    fields = {"endpoint": endpoint, "model": model, "fingerprint": fingerprint, "body": body, "sample": sample}
    return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()


class RequestLedger:
    """The exchanges of one audit's report folder, read at first use; `path` (set per chapter) is where new ones go
    (None: kept in memory only, as for a model used outside an audit)."""

    def __init__(self) -> None:
        self.path: Path | None = None
        self._found: dict[str, dict[str, Any]] | None = None
        self.asked = 0  # exchanges this process sent to the server
        self.reused = 0  # exchanges found in the ledger instead

    def answer_all(self, asked: Sequence[tuple[str, Callable[[], dict[str, Any]]]], *, workers: int,
                   order: Sequence[int] | None = None) -> list[dict[str, Any]]:
        """The exchange under each key of `asked` (key, how to ask), in its order: from the ledger where it holds it,
        else asked through a pool of `workers` threads, sent in `order` (indices; e.g. by prompt, so that prompts
        sharing a beginning reach the server together and its prefix cache hits) and appended to the file in the
        order given, each as soon as those before it are in. A failed request ends the batch: the replies in by
        then, those in flight included, are written, then its error is raised."""
        found = self._exchanges()
        first = {key: i for i, (key, _) in reversed(list(enumerate(asked)))}  # a key asked twice is asked once
        missing = [i for i in (range(len(asked)) if order is None else order)
                   if asked[i][0] not in found and first[asked[i][0]] == i]
        self.reused += len(asked) - len(missing)
        done: dict[int, dict[str, Any]] = {}
        pending = sorted(missing)  # to write, in the order given
        with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
            futures = {pool.submit(asked[i][1]): i for i in missing}
            try:
                for future in as_completed(futures):
                    i = futures[future]
                    done[i] = {"key": asked[i][0], **future.result()}
                    while pending and pending[0] in done:
                        self._write(done[pending.pop(0)])
            except BaseException:
                pool.shutdown(wait=True, cancel_futures=True)  # those in flight finish; none starts
                done |= {i: {"key": asked[i][0], **future.result()} for future, i in futures.items()
                         if not future.cancelled() and future.exception() is None}
                for i in pending:
                    if i in done:
                        self._write(done[i])
                raise
        return [found[key] for key, _ in asked]

    def all(self) -> list[dict[str, Any]]:
        """Every exchange the report folder's ledgers hold and this process asked."""
        return list(self._exchanges().values())

    def _write(self, exchange: dict[str, Any]) -> None:
        """One new exchange kept, and appended and flushed to the file where there is one."""
        self.asked += 1
        self._exchanges()[exchange["key"]] = exchange
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a", encoding="utf-8") as out:
                out.write(json.dumps(exchange, sort_keys=True) + "\n")
                out.flush()

    def _exchanges(self) -> dict[str, dict[str, Any]]:
        """Every exchange the report folder's ledgers hold, by key (a line cut by a kill is skipped: asked again)."""
        if self._found is None:
            self._found = {}
            folder = None if self.path is None else self.path.parent
            for file in sorted(folder.glob("*.jsonl")) if folder is not None and folder.is_dir() else ():
                lines = file.read_text(encoding="utf-8").splitlines()
                for number, line in enumerate(lines, start=1):
                    try:
                        exchange = json.loads(line)
                    except ValueError:
                        if number == len(lines):
                            continue  # the last line, cut as the audit was killed writing it
                        raise DataError(f"{file}: line {number} is not JSON: delete the file to ask its requests "
                                        "again") from None
                    self._found[exchange["key"]] = exchange
        return self._found
