"""The request ledger: every exchange with the endpoint as one JSON line of `<report>/requests/<chapter>.jsonl`
(the body sent, which never holds the key, the reply, status, latency, retries, `system_fingerprint`, version headers,
date), written and flushed as each reply arrives. The same lines are the cache: an exchange is found again by a key over
everything that can change an answer (the endpoint, the model's name there, the fingerprint the server gave at the
start, the whole body with its every sampling parameter and seed, the sample's index), so a killed audit resumes
asking nothing twice, whichever chapter asked first."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
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

    def answer(self, key: str, ask: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        """The exchange under `key`: from the ledger where it holds it, else asked (`ask`) and appended."""
        found = self._exchanges()
        if key in found:
            self.reused += 1
            return found[key]
        exchange = {"key": key, **ask()}
        self.asked += 1
        found[key] = exchange
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a", encoding="utf-8") as out:
                out.write(json.dumps(exchange, sort_keys=True) + "\n")
                out.flush()
        return exchange

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
