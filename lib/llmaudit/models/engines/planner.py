"""The planning engine: answers every request of the model layer without running the model, counting in the model's
ledger what the fast engines (`engines.fast`) would run and need for it, and what a model behind an endpoint
(`engines.endpoint`) would be asked, so that a chapter run with it (`llmaudit audit --dry-run`) is the ledger of the
audit at its sizes in seconds.

Counts. A scored pass and a sweep (with its exact derivative) count what the fast engines run, by their own batch
planning (`packing.packed_batches`, `batching.token_batches`) at the run's token budget: exactly, for the same prompts,
budget and lower states kept. A sampled answer counts at its greatest length (`max_new_tokens`, never ending early),
its prefill as the sampler's: a batch's common beginning once (after what the latest one holds), the answers a
`followed` request keeps continued (markedness's chain of thought after its reasoning), each chunk padded to its
longest: an upper bound of what runs for answers no longer than that, and, its tokens
taken as all different, of what is needed. An endpoint's requests: one per scored prompt (one token back) and one per
sampled answer (`max_new_tokens` back, a bound).

Outputs. Placeholders of the right shapes, seeded random numbers (as a random-weight stand-in's): probabilities that
sum to one, block outputs of the model's width, sampled answers of random whole words at their greatest length (one
token each, which the tokenizer reads back as the same tokens: `whole_words`), so that a step that builds its prompts
on earlier answers (markedness's answer after its reasoning) plans with the longest prompts, each of them different
as a sampled answer's almost always is. Lower states kept for later sweeps are stored one number wide: a later sweep
finds them where the fast engine would, and starts from the same block."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from itertools import count

import torch

from llmaudit.ledger import Ledger, call_label
from llmaudit.models.engines.base import Capability, Engine, Parts
from llmaudit.models.engines.fast import _kept_block, _lower_states
from llmaudit.models.intervention import Intervention, edit_key
from llmaudit.models.memory import AUTO, BatchTokens, Shape, planned_tokens
from llmaudit.models.passes.batching import ForwardOutput, activations_only, token_batches
from llmaudit.models.passes.packing import packed_batches
from llmaudit.models.passes.prefix import common_prefix, shareable
from llmaudit.models.passes.required import required
from llmaudit.models.passes.states import LowerStates, store_states
from llmaudit.models.passes.sweep import SweepOutput
from llmaudit.models.request import Request, Runtime, SampleRequest
from llmaudit.models.sampling.batched import Samples, _chunks
from llmaudit.models.sampling.continuations import Continuations, Kept
from llmaudit.models.sampling.sample_batches import call_batches, full_attention

PLAN_MEMORY_GIB = 80.0  # `batch_tokens: auto` is planned for a card of this much memory (an H100's), less the weights
WORD = re.compile(r" [a-z]{2,}")  # a whole lower-case word with the space before it


def whole_words(tokenizer) -> torch.Tensor:
    """The ids of the tokens that are a whole word with its space (' house') and that the tokenizer reads back as
    themselves: any run of them decodes to a text that re-tokenises, after a prompt's last word too, as the same
    tokens, so a planned answer built into a later prompt counts its greatest length; every id for a tokenizer with
    no such token (a character-level one)."""
    spelled = tokenizer.batch_decode([[i] for i in range(len(tokenizer))])
    found = [i for i, text in enumerate(spelled) if WORD.fullmatch(text)]
    read = tokenizer([spelled[i] for i in found], add_special_tokens=False)["input_ids"] if found else []
    words = [i for i, ids in zip(found, read) if ids == [i]]
    return torch.tensor(words) if words else torch.arange(len(tokenizer))


@dataclass
class Requests:
    """What an endpoint would be asked under one call label: requests, prompt tokens and completion tokens (sampled
    answers at their greatest length)."""

    requests: int = 0
    prompt: int = 0
    completion: int = 0


@dataclass
class PlanLedger(Ledger):
    """The compute ledger of a planned run: the fast engines' counts per call label, the call labels whose counts
    are upper bounds (sampling), and per label what an endpoint would be asked."""

    bounded: set[str] = field(default_factory=set)
    requests: dict[str, Requests] = field(default_factory=dict)
    asked: set[tuple] = field(default_factory=set)  # the requests counted: an endpoint's ledger answers a repeat
    entered: dict[str, int] = field(default_factory=dict)  # call label -> the engine calls made under it

    @contextmanager
    def labelled(self, label: str) -> Iterator[None]:
        """`Ledger.labelled`, counting the call."""
        self.entered[label] = self.entered.get(label, 0) + 1
        with super().labelled(label):
            yield

    def ask(self, label: str, prompts: Sequence[Sequence[int]], completion: int, how: Sequence[tuple] = ()) -> None:
        """One request per prompt (its token ids) answered with `completion` tokens, sampled as `how` says (a prompt's
        seed and sampling settings; none: a greedy read), unless the chapter asked it before: an endpoint's engine and
        its request ledger answer a repeat without asking."""
        asked = self.requests.setdefault(label, Requests())
        for prompt, sampled in zip(prompts, how or [()] * len(prompts), strict=True):
            key = (tuple(prompt), completion, sampled)
            if key not in self.asked:
                self.asked.add(key)
                asked.requests += 1
                asked.prompt += len(prompt)
                asked.completion += completion

    def totals(self) -> dict:
        return super().totals() | {"plan": {"bounded": sorted(self.bounded), "entered": self.entered,
                                            "requests": {label: vars(asked) for label, asked in self.requests.items()}}}


class PlanEngine(Engine):
    """Plans the requests an engine that can do `capabilities` (a local model's, an endpoint's) would answer: the
    fast engines' counts and an endpoint's requests, placeholder outputs."""

    name = "plan"

    def __init__(self, parts: Parts, capabilities: frozenset[Capability], *, memory_gib: float = PLAN_MEMORY_GIB,
                 seed: int = 0):
        self.parts = parts
        self.capabilities = capabilities
        self.reason = "planned, not run: the fast engines' counts and an endpoint's requests"
        self.memory = int(memory_gib * 2**30)
        self.auto = False  # whether the run's batch_tokens is auto (`loading.planned.PlannedModel`)
        self.random = torch.Generator().manual_seed(seed)
        self.fresh = count(-1, -1)  # token ids no prompt holds, for sampled answers' tokens (all different)
        self.latest: tuple[list[int], set[int]] = ([], set())  # the sampler's latest beginning, its blocks kept
        self.answers = Continuations()  # the answers a followed request keeps, tokens alone
        self.words: torch.Tensor | None = None  # `whole_words` of the model's tokenizer, found at the first answer

    @property
    def ledger(self) -> PlanLedger:
        """The model's ledger, which a planned model's is (`loading.planned`)."""
        ledger = self.parts.handle.ledger
        if not isinstance(ledger, PlanLedger):
            raise TypeError("the planning engine counts into a PlanLedger")
        return ledger

    def budget(self, requested: BatchTokens, stacked: int = 1, derivative: bool = False) -> int:
        """The tokens of one batch, as `memory.batch_budget` plans them, `auto` for a card of `PLAN_MEMORY_GIB`
        with the model's weights on it."""
        if requested != AUTO and not self.auto:
            return int(requested)
        hf = self.parts.handle.hf
        weights = sum(p.numel() * p.element_size() for p in hf.parameters())
        return planned_tokens(Shape.of(hf), self.memory - weights, stacked, derivative)

    def score(self, texts: Sequence[str], labels: Sequence[int] | None, layers: Sequence[int], *,
              batch_tokens: BatchTokens, desc: str | None = None, keep: Sequence[int] = ()) -> ForwardOutput:
        """`forward_shared_prefix`'s counts: the common beginning once, then its packed batches, through every block
        (none above the deepest read where no label is)."""
        handle = self.parts.handle
        encoded = handle.encode(texts)
        shared = common_prefix(encoded)
        depth = max([*layers, *keep]) + 1 if activations_only(labels, layers) else handle.n_layers
        label = call_label("prefix", desc)
        with self.ledger.account(encoded, depth, label=label):
            self.ledger.ran(shared * depth)
            for packed in packed_batches(handle.hf, [e[shared:] for e in encoded], handle.tokenizer.pad_token_id,
                                         self.budget(batch_tokens), shared):
                self.ledger.ran(packed.ids.numel() * depth)
            self.ledger.ask(label, encoded, 1)  # within the call: the ledger saves at its end
        states = {block: [torch.zeros(len(e), 1) for e in encoded] for block in keep}
        return ForwardOutput(self._probs(len(texts), labels), self._acts(len(texts), layers), states or None)

    def sweep(self, request: Request, runtime: Runtime, identity: dict, *, outputs: bool,
              derivative: bool) -> SweepOutput:
        """`split_sweep`'s counts: the beginning below the edit once and above it once per lambda, each packed
        batch below the edit from the block its stored lower states reach, above it once per lambda, and the
        derivative's whole prompts above it in their own batches."""
        handle, edit = self.parts.handle, required(request.edit, "the edit")
        vector, ledger = edit.vector, self.ledger
        lambdas = request.lambdas if outputs else ()
        encoded = handle.encode(request.texts)
        edits = [edit_key(vector.intervention(lam, edit.projection)) for lam in lambdas if lam is not None]
        edits += [("derivative", *edit_key(vector.intervention(0.0, edit.projection)))] if derivative else []
        shared = shareable(handle.hf, encoded)
        rest = [e[shared:] for e in encoded]
        start = _lower_states(request, runtime, identity)
        base = 0 if start is None else start.block + 1
        lower, upper = vector.layer + 1, handle.n_layers - vector.layer - 1
        ledger.spare(encoded, base)
        with ledger.account(encoded, steered=(vector.layer, edits), label=call_label("sweep", request.desc)):
            if None in lambdas:
                ledger.need(encoded)
            ledger.ran(shared * (lower + upper * len(lambdas)) if shared else 0)
            budget = self.budget(runtime.batch_tokens, stacked=runtime.lambda_batch)
            whole = min(budget, self.budget(runtime.batch_tokens, derivative=True))
            for packed in packed_batches(handle.hf, rest, handle.tokenizer.pad_token_id, budget, shared):
                ledger.ran(packed.ids.numel() * (lower - base + upper * len(lambdas)))
                if derivative:
                    members = packed.members
                    order = sorted(range(len(members)), key=lambda k: -len(rest[members[k]]))
                    lengths = [shared + len(rest[m]) for m in members]
                    for chunk in token_batches(order, lengths, whole):
                        ledger.ran(len(chunk) * max(lengths[k] for k in chunk) * upper)
        kept = _kept_block(edit, request.keep, start)
        if kept is not None:
            store_states(runtime.cache, identity, request.texts, LowerStates(kept, [torch.zeros(len(e), 1)
                                                                                   for e in encoded]))
        n = len(request.texts)
        probs = torch.stack([self._probs(n, request.labels) for _ in lambdas]) if lambdas else \
            torch.empty(0, n, len(request.labels))
        layers = request.layers if outputs else ()
        acts = torch.stack([required(self._acts(n, layers), "acts") for _ in lambdas]) if layers and lambdas else None
        return SweepOutput(probs, acts, torch.randn(n, generator=self.random) if derivative else None)

    def sample(self, request: SampleRequest, *, batch_tokens: BatchTokens) -> Samples:
        """Each batch `call_batches` makes, prefilled as the sampler prefills it (`sampling.batched._prefilled`):
        the texts that begin with a longer answer a `followed` request kept run only the rest, in their own chunks
        (`sampling.continuations`: the same entries, at the bytes the sampler's hold on a card, within its limit);
        the others' common beginning runs after the part of it the latest beginning holds (`_beginning`), then
        their chunks (`batched._chunks`) padded to each chunk's longest, no branch shared (the sampler's branches
        only run where they pad less); every answer decoded to `max_new_tokens` (an upper bound of its length),
        its placeholder tokens kept for a followed request. Needed: each text and each answer's tokens, all
        different."""
        handle, ledger, label = self.parts.handle, self.ledger, "sample"
        budget, calls, new, blocks = self.budget(batch_tokens), request.calls, request.max_new_tokens, handle.n_layers
        keep = () if request.keep is None else request.keep.blocks
        chunked, shape = full_attention(handle.hf), Shape.of(handle.hf)
        tokens = [self._answers(call.rows, new) for call in calls]
        with ledger.labelled(label):
            ledger.bounded.add(label)
            for batch in call_batches(handle, calls, new, budget):
                encoded = handle.encode([text for i in batch for text in calls[i].texts])
                found: list[Kept | None] = [None] * len(encoded)
                if not keep and chunked:
                    shared = shareable(handle.hf, encoded, new)
                    found = [kept if kept is not None and len(kept.tokens) > shared else None
                             for kept in self.answers.take(handle, encoded)]
                fresh = [e for e, kept in zip(encoded, found) if kept is None]
                if fresh:
                    shared = shareable(handle.hf, fresh, new)
                    ledger.ran((shared - self._beginning(fresh[0][:shared], keep)) * blocks)
                    for chunk in _chunks(handle.hf, fresh, shared, budget):
                        ledger.ran(len(chunk) * max(len(fresh[k]) - shared for k in chunk) * blocks)
                rest = [len(e) - len(kept.tokens) for e, kept in zip(encoded, found) if kept is not None]
                for chunk in token_batches(sorted(range(len(rest)), key=lambda k: -rest[k]), rest, budget):
                    ledger.ran(len(chunk) * max(rest[k] for k in chunk) * blocks)
                rows = [(prompt, answer) for i in batch
                        for prompt, answers in zip(handle.encode(calls[i].texts),
                                                   tokens[i].split(calls[i].per_text))
                        for answer in answers.tolist()]
                ledger.ran(len(rows) * (new - 1) * blocks)
                if request.followed and chunked:  # as the sampler keeps them: the text and the tokens fed back
                    for prompt, answer in rows:
                        self.answers.add(handle, Kept(tuple(prompt + answer[: new - 1]), (), shape.kv_bytes),
                                         shape.decode_bytes(budget, "cuda"))
            answers = []
            for call in calls:
                for prompt in handle.encode(call.texts):
                    answers += [prompt + [next(self.fresh) for _ in range(new - 1)] for _ in range(call.per_text)]
                    settings = (request.temperature, request.top_p, request.top_k, call.seed)
                    ledger.ask(label, [prompt] * call.per_text, new,
                               [(*settings, index) for index in range(call.per_text)])
            ledger.need(answers)
            if request.labels is not None:
                ledger.ask(label, handle.encode(request.texts), 1)  # an endpoint scores them apart
        states = {block: [torch.zeros(len(e), 1) for e in handle.encode(request.texts)] for block in keep}
        return Samples(tokens, None if request.labels is None else self._probs(len(request.texts), request.labels),
                       self._acts(len(request.texts), request.layers), states or None)

    def _beginning(self, tokens: list[int], keep: Sequence[int]) -> int:
        """How many of a sampled batch's common beginning `tokens` the latest beginning holds, as
        `sampling.prefix_cache.PrefixCache.beginning` reuses it (with the blocks `keep` kept; a sliding-window
        model's only where it is all of the kept one); this one is then the latest."""
        held, kept = self.latest
        reused = common_prefix([held + [-1], tokens + [-2]]) if set(keep) <= kept and tokens else 0
        if reused < len(held) and not full_attention(self.parts.handle.hf):
            reused = 0
        if tokens:
            self.latest = (tokens, set(keep))
        return reused

    def generate(self, text: str, max_new_tokens: int, intervention: Intervention | None) -> str:
        """The traced greedy continuation's counts (`passes.traced.Tracer.generate`: each step reruns the whole
        sequence), at its greatest length (an upper bound); a continuation of random whole words."""
        handle, ledger, label = self.parts.handle, self.ledger, "generate"
        ids = handle.encode([text])[0]
        new = [next(self.fresh) for _ in range(max_new_tokens)]
        with ledger.labelled(label):
            ledger.bounded.add(label)
            ledger.ran(sum(len(ids) + k for k in range(max_new_tokens)) * handle.n_layers)
            ledger.need([ids + new], steered=None if intervention is None else (intervention.layer,
                                                                                 [edit_key(intervention)]))
        return handle.tokenizer.decode(self._answers(1, max_new_tokens)[0].tolist(), skip_special_tokens=True)

    def _answers(self, rows: int, length: int) -> torch.Tensor:
        """Random answers (rows, length) of whole words (`whole_words`): any two almost surely different texts."""
        if self.words is None:
            self.words = whole_words(self.parts.handle.tokenizer)
        return self.words[torch.randint(len(self.words), (rows, length), generator=self.random)]

    def _probs(self, n: int, labels: Sequence[int] | None) -> torch.Tensor:
        """Random next-token probabilities of `labels` (None: the vocabulary), each row summing to one."""
        width = self.parts.handle.hf.config.vocab_size if labels is None else len(labels)
        probs = torch.rand(n, width, generator=self.random) + 1e-3
        return probs / probs.sum(-1, keepdim=True)

    def _acts(self, n: int, layers: Sequence[int]) -> torch.Tensor | None:
        """Random block outputs (n, layers, width); None for no layers."""
        if not layers:
            return None
        return torch.randn(n, len(layers), self.parts.handle.width, generator=self.random)


def planning(engine: Engine) -> bool:
    """Whether `engine` plans rather than runs."""
    return isinstance(engine, PlanEngine)
