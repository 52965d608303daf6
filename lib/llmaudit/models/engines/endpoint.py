"""The endpoint engine, for a model behind an OpenAI-compatible server (`models.endpoint`): next-token probabilities
of the answer words where the server returns log-probabilities (`models.endpoint.modes`), seeded sampled answers
always; no block outputs, edits or derivatives, for the endpoint exposes no weights.

Requests go to `/v1/completions` with the prompt already in the model's chat template (the audit's tokenizer applies
it, as for a local model), not to `/v1/chat/completions` with messages: the chapters read the next token after an
answer prefix ("Answer:") inside the assistant's turn, which a chat API cannot be given portably (only vLLM's
`continue_final_message` can), the answer words are the model's token ids, which only the model's own tokenizer
spells, and `transformers serve`'s chat route refuses `logprobs` while its completions route samples. So the audited
text is the same string as locally, token for token, and the server's template is not used."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

import torch

from llmaudit.capabilities import Capability
from llmaudit.ledger import Ledger, call_label
from llmaudit.models.endpoint.client import Client
from llmaudit.models.endpoint.ledger import RequestLedger, request_key
from llmaudit.models.endpoint.modes import Mode, Reading, read_answers
from llmaudit.models.engines.base import Engine
from llmaudit.models.memory import BatchTokens
from llmaudit.models.passes.batching import ForwardOutput
from llmaudit.models.passes.sweep import SweepOutput
from llmaudit.models.request import Request, Runtime, SampleRequest
from llmaudit.models.sampling.batched import Samples


class EndpointEngine(Engine):
    """A model the audit can only query over HTTP."""

    name = "endpoint"

    def __init__(self, client: Client, reading: Reading, tokenizer: Any, ledger: RequestLedger, compute: Ledger):
        self.client, self.reading, self.tokenizer = client, reading, tokenizer
        self.ledger, self.compute = ledger, compute  # the request ledger, the compute ledger
        self.capabilities = reading_capabilities(reading)
        self.coverage: list[float] = []  # each scored case's answer-word mass, in the order asked
        self.outside = 0  # answer words read outside the server's window (0: every read exact)

    @property
    def mode(self) -> Mode:
        """The mode of the reads so far: exact while every answer word lay in the window."""
        return self.reading.mode if self.outside == 0 else Mode.TOP_K

    @property
    def reason(self) -> str:  # type: ignore[override]  # the reads so far change it
        """Why this engine runs the model and how it has read it so far (the compute ledger's `engine` line, which
        the model card shows per chapter)."""
        endpoint, reading = self.client.endpoint, self.reading
        read = (f"; {self.outside} answer words outside the window, least coverage {min(self.coverage):.3f}"
                if self.outside else "")
        return (f"{endpoint.model} at {endpoint.base} exposes no weights: reading mode {self.mode} "
                f"({reading.window} log-probabilities per token, fingerprint {reading.fingerprint}){read}")

    def score(self, texts: Sequence[str], labels: Sequence[int] | None, layers: Sequence[int], *,
              batch_tokens: BatchTokens, desc: str | None = None, keep: Sequence[int] = ()) -> ForwardOutput:
        self.require([Capability.PROBABILITIES] + ([Capability.STATES] if layers or keep else []),
                     f"the pass {desc!r}" if desc else "a scored pass")
        if labels is None:
            raise self.refusal([Capability.PROBABILITIES], "the whole vocabulary's probabilities (a server returns "
                                                           f"at most {self.reading.window})")
        words = [self.tokenizer.decode([label]) for label in labels]
        rows = []
        with self.compute.labelled(call_label(self.name, desc)):
            for text in texts:
                body = {"model": self.client.endpoint.model, "prompt": text, "max_tokens": 1, "temperature": 0.0,
                        "logprobs": self.reading.window}
                read = read_answers(self._ask(body, sample=0)["response"], words)
                self.coverage.append(read.coverage)
                self.outside += read.outside
                rows.append(read.probs)
            self.compute.engine = self.reason
        return ForwardOutput(torch.tensor(rows, dtype=torch.float32).reshape(len(texts), len(labels)), None)

    def sweep(self, request: Request, runtime: Runtime, identity: dict, *, outputs: bool,
              derivative: bool) -> SweepOutput:
        raise self.refusal([Capability.EDITS], "a steering sweep")

    def sample(self, request: SampleRequest, *, batch_tokens: BatchTokens) -> Samples:
        """Each call's answers, one request per answer with its own seed (`sample_seed`), the text re-tokenised by
        the model's tokenizer; label probabilities from the same prompts where asked and readable."""
        self.require([Capability.PROBABILITIES] if request.labels is not None else [], "sampling with probabilities")
        if request.layers or request.keep is not None:
            raise self.refusal([Capability.STATES], "sampling with block outputs")
        tokens = []
        with self.compute.labelled(call_label(self.name, request.desc)):
            tokens = self._sampled(request)
        probs = None
        if request.labels is not None:
            probs = self.score(request.texts, request.labels, (), batch_tokens=batch_tokens).probs
        return Samples(tokens, probs)

    def _sampled(self, request: SampleRequest) -> list[torch.Tensor]:
        """Per call, its answers' token ids (rows, max_new_tokens)."""
        tokens = []
        for call in request.calls:
            rows = []
            for text in call.texts:
                for index in range(call.per_text):
                    body = {"model": self.client.endpoint.model, "prompt": text,
                            "max_tokens": request.max_new_tokens, "temperature": request.temperature,
                            "top_p": request.top_p, "seed": sample_seed(call.seed, index)}
                    if request.top_k is not None:
                        body["top_k"] = request.top_k  # vLLM, SGLang and llama.cpp take it; OpenAI's API does not
                    reply = self._ask(body, sample=index)["response"]
                    rows.append(self._tokens(reply["choices"][0]["text"], request.max_new_tokens))
            tokens.append(torch.tensor(rows, dtype=torch.long).reshape(call.rows, request.max_new_tokens))
        return tokens

    def _ask(self, body: dict[str, Any], *, sample: int) -> dict[str, Any]:
        """One exchange, from the request ledger where it holds it."""
        endpoint = self.client.endpoint
        key = request_key(endpoint=endpoint.base, model=endpoint.model, fingerprint=self.reading.fingerprint,
                          body=body, sample=sample)
        return self.ledger.answer(key, lambda: self.client.complete(body))

    def _tokens(self, text: str, width: int) -> list[int]:
        """A sampled answer's token ids by the model's tokenizer, cut or padded with -1 to `width`."""
        ids = self.tokenizer.encode(text, add_special_tokens=False)[:width]
        return ids + [-1] * (width - len(ids))


def reading_capabilities(reading: Reading) -> frozenset[Capability]:
    """What an endpoint read as `reading` can answer: sampled answers, and probabilities where it returns
    log-probabilities."""
    return frozenset({Capability.SAMPLING} | ({Capability.PROBABILITIES} if reading.window else set()))


def sample_seed(seed: int, index: int) -> int:
    """The seed sent for answer `index` of a call seeded `seed`: distinct per (seed, index), within 31 bits, which
    every server takes."""
    return int.from_bytes(hashlib.sha256(f"{seed}:{index}".encode()).digest()[:4], "big") >> 1
