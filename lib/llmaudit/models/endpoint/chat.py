"""The chat route, for servers that offer only `/v1/chat/completions` (hosted APIs): the server applies its own chat
template to messages, returns at most its top 20 log-probabilities per token (`logprobs: true, top_logprobs: k`), and
the auditor may have no tokenizer for the model.

A chapter's prompt reaches it as a *chat prompt* (`chat_prompt`): the structured turns the model's `chat(prompt,
prefix)` was given, as JSON, never a rendered template parsed back. The answer prefix ("Answer:") a local prompt puts
inside the assistant's turn cannot be sent portably (only vLLM's `continue_final_message` takes it), so the user turn
ends with the instruction to begin with it (`INSTRUCTION`), and the reply is read after the prefix where the model
repeats it, from its first token where it does not (`answer_position`)."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

from llmaudit.models.endpoint.modes import PROBE, Read

INSTRUCTION = 'Begin your reply with "{prefix}".'  # appended to the user turn where the prompt has an answer prefix


def chat_prompt(prompt: str, prefix: str = "", system: str | None = None) -> str:
    """The chat route's text for a prompt answered from `prefix`, with the params' system prompt: its turns as JSON
    (what the request ledger, the caches and a case's page show)."""
    return json.dumps({"system": system, "user": prompt, "prefix": prefix}, ensure_ascii=False)


def turns(text: str) -> tuple[list[dict[str, str]], str]:
    """The messages sent for a chat prompt, and its answer prefix; a text that is no chat prompt (a chapter's own
    string) is sent as the user turn as it is."""
    try:
        fields = json.loads(text)
    except ValueError:
        fields = None
    if not isinstance(fields, dict) or set(fields) != {"system", "user", "prefix"}:
        return [{"role": "user", "content": text}], ""
    prefix = fields["prefix"].strip()
    user = fields["user"] + (f"\n\n{INSTRUCTION.format(prefix=prefix)}" if prefix else "")
    system = [{"role": "system", "content": fields["system"]}] if fields["system"] is not None else []
    return [*system, {"role": "user", "content": user}], prefix


class Chat:
    """Requests to `/v1/chat/completions` and how their replies are read."""

    name = "chat"

    @staticmethod
    def probe(model: str, window: int) -> dict[str, Any]:
        """The probe: one greedy token of a fixed question with `window` log-probabilities."""
        return {"model": model, "messages": [{"role": "user", "content": PROBE}], "max_tokens": 1,
                "temperature": 0.0, "logprobs": True, "top_logprobs": window}

    @staticmethod
    def window(reply: Mapping[str, Any]) -> int:
        """How many log-probabilities per position a chat reply holds (0: none, as `transformers serve` gives)."""
        content = (reply["choices"][0].get("logprobs") or {}).get("content") or []
        return len(content[0].get("top_logprobs") or []) if content else 0

    @staticmethod
    def scored(model: str, text: str, window: int) -> dict[str, Any]:
        """A greedy reply long enough to repeat the prefix and give one answer token, with `window`
        log-probabilities per token (a character of the prefix is at least a token's worth of room)."""
        messages, prefix = turns(text)
        return {"model": model, "messages": messages, "max_tokens": len(prefix) + 2, "temperature": 0.0,
                "logprobs": True, "top_logprobs": window}

    @staticmethod
    def sampled(model: str, text: str, max_tokens: int, settings: dict[str, Any]) -> dict[str, Any]:
        """One sampled reply under `settings` (temperature, top_p, seed ...), with room to repeat the prefix."""
        messages, prefix = turns(text)
        return {"model": model, "messages": messages, "max_tokens": max_tokens + len(prefix), **settings}

    @staticmethod
    def prompt(body: Mapping[str, Any]) -> str:
        """What orders the requests so that those sharing a beginning go together."""
        return json.dumps(body["messages"], ensure_ascii=False)

    @staticmethod
    def read(reply: Mapping[str, Any], words: Sequence[str], text: str) -> Read:
        """The answer `words` read from the window at the answer's position (`answer_position`), each token's
        spelling matched with leading space and case aside; a spelling several words share counts for the first."""
        content = (reply["choices"][0].get("logprobs") or {}).get("content") or []
        at = answer_position([token["token"] for token in content], turns(text)[1])
        window = {} if at >= len(content) else {top["token"]: top["logprob"] for top in content[at]["top_logprobs"]}
        spelled = [spelling(word) for word in words]
        probs = [0.0] * len(words)
        for token, logprob in window.items():
            if spelling(token) in spelled:
                probs[spelled.index(spelling(token))] += math.exp(logprob)
        outside = sum(spelled.index(word) == i and probs[i] == 0.0 for i, word in enumerate(spelled))
        unseen = outside * math.exp(min(window.values())) if window else float(outside)
        found = sum(probs)
        return Read(probs, found / (found + unseen) if found + unseen > 0 else 0.0, outside)

    @staticmethod
    def answer(reply: Mapping[str, Any], text: str) -> str:
        """The reply's text after the answer prefix where the model repeats it (case aside), as a local answer
        follows the prefix."""
        said = reply["choices"][0]["message"]["content"] or ""
        prefix = turns(text)[1]
        begun = said.lstrip()
        return begun[len(prefix):] if prefix and begun.casefold().startswith(prefix.casefold()) else said


def spelling(token: str) -> str:
    """A token's spelling with leading space and case aside, as answer words are matched on the chat route."""
    return token.lstrip().casefold()


def answer_position(tokens: Sequence[str], prefix: str) -> int:
    """The position of the answer token in a reply's `tokens`: after the prefix where the reply begins with it
    (leading space and case aside), else the first; whitespace-only tokens after the prefix skipped."""
    want, said = prefix.strip().casefold(), ""
    if not want:
        return 0
    for at, token in enumerate(tokens):
        begun = said.strip().casefold()
        if begun == want and token.strip():
            return at
        if not want.startswith(begun):
            return 0
        said += token
    return len(tokens) if said.strip().casefold() == want else 0
