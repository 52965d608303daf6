"""The audited model when it sits behind an endpoint: an `AuditModel` with the model's tokenizer and chat template
(loaded from the params' source, the weights never), no blocks, and the endpoint engine, whose reading mode the
start-up probe decides (`models.endpoint.modes`). On the chat route its prompts are the turns themselves
(`endpoint.chat.chat_prompt`), and with no tokenizer given, spellings stand in for one (`endpoint.spellings`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from llmaudit.errors import ConfigError
from llmaudit.ledger import Ledger
from llmaudit.models.endpoint.chat import chat_prompt
from llmaudit.models.endpoint.client import Client, Endpoint
from llmaudit.models.endpoint.ledger import RequestLedger
from llmaudit.models.endpoint.modes import Reading
from llmaudit.models.endpoint.routes import ROUTES
from llmaudit.models.endpoint.spellings import Spellings
from llmaudit.models.engines.endpoint import EndpointEngine
from llmaudit.models.request import Runtime
from llmaudit.models.runtime import AuditModel


class EndpointModel(AuditModel):
    """A model behind an OpenAI-compatible endpoint: prompts formatted as for a local model (as turns on the chat
    route), every request answered by `EndpointEngine` through the request ledger `requests`. `tokenizer` None: the
    chat route's spellings (`endpoint.spellings`)."""

    def __init__(self, name: str, endpoint: Endpoint, tokenizer: Any | None, *, window: int, provenance: dict,
                 system_prompt: str | None = None, chat_template: bool = True,
                 template_options: Mapping[str, bool | int | str] | None = None, min_coverage: float,
                 max_samples: int):
        self.name, self.hf, self.lm, self.device = name, None, None, "cpu"
        self.system_prompt, self.chat_template = system_prompt, chat_template
        self.template_options = dict(template_options or {})
        self.runtime = Runtime()
        self.n_layers, self.width = 0, 0
        self.ledger = Ledger(0)
        self.requests = RequestLedger()
        self.route = endpoint.route
        if tokenizer is None and self.route != "chat":
            raise ConfigError(f"model {name}: the completions route renders prompts with the model's tokenizer: give "
                              "its source (model.hf or model.path), or set model.route: chat")
        if tokenizer is None:
            tokenizer = Spellings(lambda: [exchange["response"]["choices"][0]["message"]["content"] or ""
                                           for exchange in self.requests.all() if exchange.get("route") == "chat"])
        elif tokenizer.pad_token_id is None:
            tokenizer.pad_token = tokenizer.eos_token
        self.tokenizer, self.remote = tokenizer, True
        client = Client(endpoint)
        reading = probe(client, window)
        self.engine: EndpointEngine = EndpointEngine(client, reading, tokenizer, self.requests, self.ledger,
                                                      min_coverage=min_coverage, max_samples=max_samples)
        self.ledger.engine = self.engine.reason
        self.provenance = {**provenance, "source": f"{endpoint.base}#{endpoint.model}", "sha256": None,
                           "endpoint": endpoint.base, "served": endpoint.model, "route": endpoint.route,
                           "reading": str(reading.mode), "window": reading.window,
                           "system_fingerprint": reading.fingerprint}

    def chat(self, prompt: str, prefix: str = "") -> str:
        """On the chat route, the turns sent (`endpoint.chat.chat_prompt`: the server applies its template); on the
        completions route, the prompt in the model's template, as for a local model."""
        if self.route == "chat":
            return chat_prompt(prompt, prefix, self.system_prompt)
        return super().chat(prompt, prefix)

    def plain(self, text: str) -> str:
        """On the chat route, `text` as the user turn (a chat API continues no plain text); else as it is, after the
        tokenizer's beginning-of-sequence token."""
        return chat_prompt(text) if self.route == "chat" else super().plain(text)

    @property
    def identity(self) -> dict:
        """What determines the answers: the endpoint, the model's name there and the fingerprint at the start."""
        p = self.provenance
        return {"weights": f"{p['endpoint']}#{p['served']}@{p['system_fingerprint']}", "dtype": "endpoint",
                "device": "endpoint"}


def probe(client: Client, window: int) -> Reading:
    """The reading the server allows: one request on the endpoint's route asking `window` log-probabilities (not
    cached: the server may have changed since the last run)."""
    route = ROUTES[client.endpoint.route]
    return reading_of(client.complete(route.probe(client.endpoint.model, window)), window)


def reading_of(exchange: dict, window: int) -> Reading:
    """The reading a probe's exchange shows, for `window` log-probabilities asked."""
    route = ROUTES[exchange.get("route", "completions")]
    return Reading(window=min(route.window(exchange["response"]), window), fingerprint=exchange["system_fingerprint"])
