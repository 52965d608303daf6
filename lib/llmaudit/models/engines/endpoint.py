"""The endpoint engine, for a model behind an OpenAI-compatible server (`models.endpoint`): next-token probabilities
of the answer words where the server returns log-probabilities (`models.endpoint.modes`), seeded sampled answers
always; no block outputs, edits or derivatives, for the endpoint exposes no weights.

By default (`model.route: completions`) requests go to `/v1/completions` with the prompt already in the model's chat
template (the audit's tokenizer applies it, as for a local model), not to `/v1/chat/completions` with messages: the
chapters read the next token after an answer prefix ("Answer:") inside the assistant's turn, which a chat API cannot
be given portably (only vLLM's `continue_final_message` can), the answer words are the model's token ids, which only
the model's own tokenizer spells, and `transformers serve`'s chat route ignores `logprobs` while its completions route
samples. So the audited text is the same string as locally, token for token, and the server's template is not used.

For servers with only a chat route (hosted APIs), `model.route: chat` (`models.endpoint.chat`) sends each prompt's
turns as messages, the server's template applies them, the answer prefix becomes an instruction in the user turn,
answer words are matched to the window's token strings with leading space and case aside, and no tokenizer is needed
(`models.endpoint.spellings` stands in where none is given). Both routes build their requests and read their replies
in `models.endpoint.routes`; everything else here is shared."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from functools import partial
from typing import Any

import torch

from llmaudit.capabilities import Capability
from llmaudit.ledger import Ledger, call_label
from llmaudit.models.endpoint.client import Client
from llmaudit.models.endpoint.ledger import RequestLedger, request_key
from llmaudit.models.endpoint.modes import Mode, Read, Reading
from llmaudit.models.endpoint.routes import ROUTES
from llmaudit.models.engines.base import Engine
from llmaudit.models.memory import BatchTokens
from llmaudit.models.passes.batching import ForwardOutput
from llmaudit.models.passes.sweep import SweepOutput
from llmaudit.models.request import Request, Runtime, SampleRequest
from llmaudit.models.sampling.batched import Samples


class EndpointEngine(Engine):
    """A model the audit can only query over HTTP."""

    name = "endpoint"

    def __init__(self, client: Client, reading: Reading, tokenizer: Any, ledger: RequestLedger, compute: Ledger, *,
                 min_coverage: float, max_samples: int):
        self.client, self.reading, self.tokenizer = client, reading, tokenizer
        self.ledger, self.compute = ledger, compute  # the request ledger, the compute ledger
        self.min_coverage, self.max_samples = min_coverage, max_samples
        self.route = ROUTES[client.endpoint.route]
        self.capabilities = reading_capabilities(reading)
        self.reads: dict[tuple[str, tuple[str, ...]], Read] = {}  # each scored case's read, by prompt and answers
        self.fingerprints: list[str | None] = [reading.fingerprint]  # the server's, each once, in the order seen

    @property
    def outside(self) -> int:
        """Answer words read outside the server's window so far (0: every read exact)."""
        return sum(read.outside for read in self.reads.values())

    @property
    def mode(self) -> Mode:
        """The mode of the reads so far: exact while every answer word lay in the window."""
        return self.reading.mode if self.outside == 0 else Mode.TOP_K

    @property
    def reason(self) -> str:  # type: ignore[override]  # the reads so far change it
        """Why this engine runs the model and how it has read it so far (the compute ledger's `engine` line, which
        the model card shows per chapter)."""
        endpoint, reading = self.client.endpoint, self.reading
        least = min((read.coverage for read in self.reads.values()), default=1.0)
        read = f"; {self.outside} answer words outside the window, least coverage {least:.3f}" if self.outside else ""
        seen = [str(fingerprint) for fingerprint in self.fingerprints]
        changed = (f"; fingerprints seen {', '.join(seen)}: changed mid-run, so later answers came from another "
                   "build or configuration of the server" if len(seen) > 1 else "")
        return (f"{endpoint.model} at {endpoint.base} ({self.route.name} route) exposes no weights: reading mode "
                f"{self.mode} "
                f"({reading.window} log-probabilities per token, fingerprint {reading.fingerprint}){read}{changed}")

    def score(self, texts: Sequence[str], labels: Sequence[int] | None, layers: Sequence[int], *,
              batch_tokens: BatchTokens, desc: str | None = None, keep: Sequence[int] = ()) -> ForwardOutput:
        self.require([Capability.PROBABILITIES] + ([Capability.STATES] if layers or keep else []),
                     f"the pass {desc!r}" if desc else "a scored pass")
        if labels is None:
            raise self.refusal([Capability.PROBABILITIES], "the whole vocabulary's probabilities (a server returns "
                                                           f"at most {self.reading.window})")
        with self.compute.labelled(call_label(self.name, desc)):
            rows = [read.probs for read in self._reads(texts, labels)]
            self.compute.engine = self.reason
        return ForwardOutput(torch.tensor(rows, dtype=torch.float32).reshape(len(texts), len(labels)), None)

    def coverage(self, texts: Sequence[str], labels: Sequence[int]) -> list[float] | None:
        """Per text, the least share of the answer words' mass its top-k read covers (`modes.read_answers`), each read
        from the request ledger; None in sampled mode, which reads no probabilities."""
        if not self.reading.window:
            return None
        with self.compute.labelled(call_label(self.name, "coverage")):
            return [read.coverage for read in self._reads(texts, labels)]

    def _reads(self, texts: Sequence[str], labels: Sequence[int]) -> list[Read]:
        """Each prompt's answer words (`labels`) read from the server's window at the next token."""
        words = tuple(self.tokenizer.decode([label]) for label in labels)
        new = [text for text in dict.fromkeys(texts) if (text, words) not in self.reads]
        bodies = [(self.route.scored(self.client.endpoint.model, text, self.reading.window), 0) for text in new]
        for text, exchange in zip(new, self._ask(bodies)):
            self.reads[text, words] = self.route.read(exchange["response"], words, text)
        return [self.reads[text, words] for text in texts]

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
            self.compute.engine = self.reason
        probs = None
        if request.labels is not None:
            probs = self.score(request.texts, request.labels, (), batch_tokens=batch_tokens).probs
        return Samples(tokens, probs)

    def _sampled(self, request: SampleRequest) -> list[torch.Tensor]:
        """Per call, its answers' token ids (rows, max_new_tokens), every call's requests sent in one batch."""
        bodies, texts = [], []
        for call in request.calls:
            for text in call.texts:
                for index in range(call.per_text):
                    settings = {"temperature": request.temperature, "top_p": request.top_p,
                                "seed": sample_seed(call.seed, index)}
                    if request.top_k is not None:
                        settings["top_k"] = request.top_k  # vLLM, SGLang and llama.cpp take it; OpenAI's API does not
                    bodies.append((self.route.sampled(self.client.endpoint.model, text, request.max_new_tokens,
                                                      settings), index))
                    texts.append(text)
        rows = [self._tokens(self.route.answer(exchange["response"], text), request.max_new_tokens)
                for text, exchange in zip(texts, self._ask(bodies))]
        tokens = torch.tensor(rows, dtype=torch.long).reshape(len(rows), request.max_new_tokens)
        return list(tokens.split([call.rows for call in request.calls]))

    def _ask(self, bodies: Sequence[tuple[dict[str, Any], int]]) -> list[dict[str, Any]]:
        """The exchanges of requests (body, sample index), in their order, from the request ledger where it holds
        them, the others sent `Endpoint.concurrency` at a time in the order of their prompts, so that prompts sharing
        a beginning reach the server together (its prefix cache, where it keeps one, then holds that beginning)."""
        endpoint = self.client.endpoint
        asked = [(request_key(endpoint=endpoint.base, model=endpoint.model, fingerprint=self.reading.fingerprint,
                              body=body, sample=sample), partial(self.client.complete, body))
                 for body, sample in bodies]
        order = sorted(range(len(bodies)), key=lambda i: self.route.prompt(bodies[i][0]))
        exchanges = self.ledger.answer_all(asked, workers=endpoint.concurrency, order=order)
        for exchange in exchanges:
            if (fingerprint := exchange.get("system_fingerprint")) not in self.fingerprints:
                self.fingerprints.append(fingerprint)
        return exchanges

    def _tokens(self, text: str, width: int) -> list[int]:
        """A sampled answer's token ids by the model's tokenizer (or the chat route's stand-in for one), cut or padded
        with -1 to `width`."""
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
