"""The audited model when it sits behind an endpoint: an `AuditModel` with the model's tokenizer and chat template
(loaded from the params' source, the weights never), no blocks, and the endpoint engine, whose reading mode the
start-up probe decides (`models.endpoint.modes`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from llmaudit.ledger import Ledger
from llmaudit.models.endpoint.client import Client, Endpoint
from llmaudit.models.endpoint.ledger import RequestLedger
from llmaudit.models.endpoint.modes import Reading, probe_body, window_of
from llmaudit.models.engines.endpoint import EndpointEngine
from llmaudit.models.request import Runtime
from llmaudit.models.runtime import AuditModel


class EndpointModel(AuditModel):
    """A model behind an OpenAI-compatible endpoint: prompts formatted as for a local model, every request answered
    by `EndpointEngine` through the request ledger `requests`."""

    def __init__(self, name: str, endpoint: Endpoint, tokenizer: Any, *, window: int, provenance: dict,
                 system_prompt: str | None = None, chat_template: bool = True,
                 template_options: Mapping[str, bool | int | str] | None = None, min_coverage: float,
                 max_samples: int):
        self.name, self.hf, self.lm, self.device = name, None, None, "cpu"
        self.tokenizer, self.remote = tokenizer, True
        self.system_prompt, self.chat_template = system_prompt, chat_template
        self.template_options = dict(template_options or {})
        self.runtime = Runtime()
        self.n_layers, self.width = 0, 0
        if tokenizer.pad_token_id is None:
            tokenizer.pad_token = tokenizer.eos_token
        self.ledger = Ledger(0)
        self.requests = RequestLedger()
        client = Client(endpoint)
        reading = probe(client, window)
        self.engine: EndpointEngine = EndpointEngine(client, reading, tokenizer, self.requests, self.ledger,
                                                      min_coverage=min_coverage, max_samples=max_samples)
        self.ledger.engine = self.engine.reason
        self.provenance = {**provenance, "source": f"{endpoint.base}#{endpoint.model}", "sha256": None,
                           "endpoint": endpoint.base, "served": endpoint.model,
                           "reading": str(reading.mode), "window": reading.window,
                           "system_fingerprint": reading.fingerprint}

    @property
    def identity(self) -> dict:
        """What determines the answers: the endpoint, the model's name there and the fingerprint at the start."""
        p = self.provenance
        return {"weights": f"{p['endpoint']}#{p['served']}@{p['system_fingerprint']}", "dtype": "endpoint",
                "device": "endpoint"}


def probe(client: Client, window: int) -> Reading:
    """The reading the server allows: one request asking `window` log-probabilities (not cached: the server may have
    changed since the last run)."""
    return reading_of(client.complete(probe_body(client.endpoint.model, window)), window)


def reading_of(exchange: dict, window: int) -> Reading:
    """The reading a probe's exchange shows, for `window` log-probabilities asked."""
    return Reading(window=min(window_of(exchange["response"]), window), fingerprint=exchange["system_fingerprint"])
