"""The two ways an endpoint is asked (`model.route`): `completions`, the default where the server has it, sends the
prompt rendered in the model's chat template by its own tokenizer (`engines.endpoint`); `chat`, for servers with only
`/v1/chat/completions`, sends the prompt's turns as messages (`endpoint.chat`). Each route builds the requests' bodies
and reads the replies; the engine is the same for both."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from llmaudit.models.endpoint.chat import Chat
from llmaudit.models.endpoint.modes import Read, probe_body, read_answers, window_of

RouteName = Literal["completions", "chat"]


class Completions:
    """Requests to `/v1/completions` with the rendered prompt, read at the completion's first token."""

    name = "completions"

    @staticmethod
    def probe(model: str, window: int) -> dict[str, Any]:
        """The probe (`modes.probe_body`)."""
        return probe_body(model, window)

    @staticmethod
    def window(reply: Mapping[str, Any]) -> int:
        """How many log-probabilities per position a completion holds (`modes.window_of`)."""
        return window_of(reply)

    @staticmethod
    def scored(model: str, text: str, window: int) -> dict[str, Any]:
        """One greedy token with `window` log-probabilities."""
        return {"model": model, "prompt": text, "max_tokens": 1, "temperature": 0.0, "logprobs": window}

    @staticmethod
    def sampled(model: str, text: str, max_tokens: int, settings: dict[str, Any]) -> dict[str, Any]:
        """One sampled continuation under `settings` (temperature, top_p, seed ...)."""
        return {"model": model, "prompt": text, "max_tokens": max_tokens, **settings}

    @staticmethod
    def prompt(body: Mapping[str, Any]) -> str:
        """What orders the requests so that those sharing a beginning go together."""
        return body["prompt"]

    @staticmethod
    def read(reply: Mapping[str, Any], words: Sequence[str], text: str) -> Read:
        """The answer words, spelled as the tokenizer spells them, at the first position (`modes.read_answers`)."""
        return read_answers(reply, words)

    @staticmethod
    def answer(reply: Mapping[str, Any], text: str) -> str:
        """The continuation, which follows the prefix the prompt ends in."""
        return reply["choices"][0]["text"]


Route = Completions | Chat
ROUTES: dict[str, Route] = {"completions": Completions(), "chat": Chat()}
