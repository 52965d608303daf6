"""One exchange with an endpoint's `/v1/completions` or `/v1/chat/completions` (`Endpoint.route`), through the
maintained `openai` client: its retries (bounded, exponential backoff on 408, 409, 429 and 5xx and on timeouts,
honouring `Retry-After`) and its timeout; a request that still fails, or a reply that is not the JSON of a completion,
ends in one AuditError line naming the endpoint. The API
key comes only from the environment variable the params name and is never part of what an exchange returns."""

from __future__ import annotations

import json
import os
import time
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from llmaudit.environment import exported
from llmaudit.errors import AuditError, ConfigError


@dataclass(frozen=True, kw_only=True)
class Endpoint:
    """Where the model is served: the server's base URL (up to, not including, `/v1`), the model's name there, the
    environment variable holding the API key (None: no key), the seconds one attempt may take, the retries after
    the first attempt, the requests in flight at once and the route asked (`endpoint.routes`: completions or
    chat)."""

    url: str
    model: str
    api_key_env: str | None = None
    timeout: float = 60.0
    retries: int = 5
    concurrency: int = 8
    route: str = "completions"

    @property
    def base(self) -> str:
        """The OpenAI base URL, `<url>/v1`."""
        url = self.url.rstrip("/")
        return url if url.endswith("/v1") else f"{url}/v1"


def key_of(endpoint: Endpoint) -> str:
    """The API key from the environment variable `endpoint.api_key_env` ('' where none is named); a named variable
    that is unset or empty is a one-line ConfigError."""
    if endpoint.api_key_env is None:
        return ""
    key = os.environ.get(endpoint.api_key_env, "")
    if not key:
        raise ConfigError(f"the API key's environment variable {endpoint.api_key_env} is unset or empty: export it, or "
                          "name another with --api-key-env")
    return key


class Client:
    """POSTs completions (chat completions on the chat route) to one endpoint and returns each exchange as a record
    for the request ledger."""

    def __init__(self, endpoint: Endpoint):
        import openai

        self.endpoint = endpoint
        # the client wants some key: a keyless local server is sent a placeholder, never written anywhere (offline,
        # where nothing is sent, no key is read)
        key = "" if os.environ.get(OFFLINE) else key_of(endpoint)
        self._openai = openai.OpenAI(base_url=endpoint.base, api_key=key or "no-key",
                                     timeout=endpoint.timeout, max_retries=endpoint.retries)

    def complete(self, body: dict[str, Any]) -> dict[str, Any]:
        """POST `body` (the completion's parameters, `model` included) to the endpoint's route and return the
        exchange: the route, the body sent, the reply's JSON, its HTTP status, latency in seconds, retries taken,
        `system_fingerprint`, the server's version headers and the UTC date. Offline (`OFFLINE` set), nothing is
        sent: the start-up probe is answered as it was recorded, and any other request (one the request ledger did
        not hold) is a one-line AuditError naming it."""
        import openai

        if os.environ.get(OFFLINE):
            return self._recorded(body, Path(os.environ[OFFLINE]))
        chat = self.endpoint.route == "chat"
        fields = _CHAT_FIELDS if chat else _OPENAI_FIELDS
        extra = {name: body[name] for name in body if name not in fields}
        known = {name: value for name, value in body.items() if name in fields}
        create = (self._openai.chat.completions if chat else self._openai.completions).with_raw_response.create
        started, date = time.perf_counter(), datetime.now(UTC).isoformat(timespec="seconds")
        try:
            raw = create(**known, extra_body=extra or None)
        except openai.APIStatusError as err:
            raise self._failed(f"HTTP {err.status_code} after {self.endpoint.retries} retries "
                               f"({_first_line(err.message)})") from None
        except openai.APITimeoutError:
            raise self._failed(f"no reply within {self.endpoint.timeout:g} s, {self.endpoint.retries} retries") \
                from None
        except openai.APIConnectionError as err:
            raise self._failed(f"cannot connect ({_first_line(str(err.__cause__ or err))})") from None
        latency = time.perf_counter() - started
        try:
            reply = raw.http_response.json()
            if not isinstance(reply["choices"][0]["message"]["content"] if chat else reply["choices"][0]["text"],
                              str | None):
                raise TypeError
        except (ValueError, KeyError, IndexError, TypeError):
            raise self._failed(f"the reply is not a {'chat ' * chat}completion's JSON (HTTP {raw.status_code}, "
                               f"{_first_line(raw.http_response.text)[:80]!r})") from None
        headers = {name: value for name, value in raw.headers.items() if "version" in name or name == "server"}
        return {"route": self.endpoint.route, "body": body, "response": reply, "status": raw.status_code,
                "latency": round(latency, 4), "retries": raw.retries_taken,
                "system_fingerprint": reply.get("system_fingerprint"), "headers": headers, "date": date}

    def _recorded(self, body: dict[str, Any], folder: Path) -> dict[str, Any]:
        """Offline: the last probe recorded in `folder` where `body` is that probe; any other request stops."""
        path = folder / PROBES
        lines = path.read_text(encoding="utf-8").splitlines() if path.is_file() else []
        recorded = json.loads(lines[-1]) if lines else None
        if recorded is not None and recorded["body"] == body:
            return {name: value for name, value in recorded.items() if name != "key"}
        what = json.dumps({name: body[name] for name in sorted(body) if name not in ("prompt", "messages")})
        prompt = body.get("prompt", json.dumps(body.get("messages"), ensure_ascii=False))
        raise AuditError(f"--offline: the request ledger in {folder} holds no answer to the request for prompt "
                         f"{_first_line(str(prompt))[:60]!r} ({what}): rerun without --offline to "
                         "ask the server")

    def _failed(self, why: str) -> AuditError:
        """The one line a failed request ends in."""
        return AuditError(f"endpoint {self.endpoint.base}, model {self.endpoint.model}: {why}: check the server "
                          "(finished requests are kept in the request ledger; rerun to go on)")


OFFLINE = "LLMAUDIT_OFFLINE"  # set to a request ledger's folder: every answer comes from it, none from the server
PROBES = "probe.jsonl"  # in that folder: the start-up probes of the audits that wrote it, one JSON line each
_OPENAI_FIELDS = {"model", "prompt", "max_tokens", "temperature", "top_p", "seed", "logprobs", "n", "stop"}
_CHAT_FIELDS = {"model", "messages", "max_tokens", "temperature", "top_p", "seed", "logprobs", "top_logprobs", "n",
                "stop"}


def offline(requests: Path) -> AbstractContextManager[None]:
    """Within it, every Client of this process and of the chapters' kernels it starts (they inherit its environment)
    answers from the request ledger in `requests` and sends nothing."""
    return exported(OFFLINE, str(requests))


def _first_line(text: str) -> str:
    """The first line of a message, for the one-line error."""
    lines = str(text).strip().splitlines()
    return lines[0] if lines else "no message"
