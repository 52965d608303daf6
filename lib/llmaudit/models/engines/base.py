"""What every engine is: a name, the reason it runs this model (for the progress line and the ledger), what it can
answer, and the three requests of the model layer (an unsteered scoring pass, a steering sweep, seeded samples).
A request an engine cannot answer is refused with one line naming the engine and the missing capability."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from typing import Protocol

from llmaudit.capabilities import Capability
from llmaudit.errors import AuditError
from llmaudit.models.memory import BatchTokens
from llmaudit.models.passes.batching import ForwardOutput
from llmaudit.models.passes.handle import Handle
from llmaudit.models.passes.sweep import SweepOutput
from llmaudit.models.passes.traced import Tracer
from llmaudit.models.request import Request, Runtime, SampleRequest
from llmaudit.models.sampling.batched import Samples


class Parts(Protocol):
    """What an engine takes of the model it runs, read at each call (a benchmark or test may give the model a fresh
    ledger): its local parts (`handle`; a remote model has none) and its traced forward (`tracer`)."""

    @property
    def handle(self) -> Handle: ...

    @property
    def tracer(self) -> Tracer: ...


class NotAnswerable(AuditError):
    """A request needs what the model's engine cannot do."""


class Engine(ABC):
    """One way of running a model. `name` labels its passes in the ledger, `reason` says why it runs this model."""

    name: str
    reason: str
    capabilities: frozenset[Capability]
    min_coverage = 0.0  # the least answer-word coverage a test's reads may have (an exact read covers all: 1)
    max_samples = 100  # the most answers sampled per prompt where a decision is read from samples (no probabilities)

    def require(self, needed: Iterable[Capability], purpose: str) -> None:
        """Refuse `purpose` with one line if this engine lacks any of `needed`."""
        missing = [capability for capability in needed if capability not in self.capabilities]
        if missing:
            raise self.refusal(missing, purpose)

    def refusal(self, missing: Sequence[Capability], purpose: str) -> NotAnswerable:
        """The one line that refuses `purpose`, naming this engine and what it lacks."""
        lacking = " and ".join(str(capability) for capability in missing)
        return NotAnswerable(f"{purpose} needs {lacking}, which the {self.name} engine cannot give ({self.reason})")

    def can(self, capability: Capability) -> bool:
        """Whether this engine can answer requests that need `capability`."""
        return capability in self.capabilities

    @property
    def steers(self) -> bool:
        """Whether this engine runs a chapter's white-box parts: block outputs and steering edits (an endpoint's
        cannot: it exposes no weights)."""
        return self.can(Capability.STATES) and self.can(Capability.EDITS)

    def coverage(self, texts: Sequence[str], labels: Sequence[int]) -> list[float] | None:
        """Per text, the least share of its answer words' (`labels`) probability mass the read covers; None where
        every read is exact (a model's own pass, or a server whose window holds every answer word)."""
        return None

    @abstractmethod
    def score(self, texts: Sequence[str], labels: Sequence[int] | None, layers: Sequence[int], *,
              batch_tokens: BatchTokens, desc: str | None = None, keep: Sequence[int] = ()) -> ForwardOutput:
        """The unsteered pass: label probabilities (the vocabulary's when `labels` is None) and last-token outputs of
        `layers` of chat-formatted `texts`, and the outputs of blocks `keep` at every token where it keeps states."""

    @abstractmethod
    def sweep(self, request: Request, runtime: Runtime, identity: dict, *, outputs: bool,
              derivative: bool) -> SweepOutput:
        """The steered request (`request.edit` set): its outputs per lambda where `outputs`, the exact derivative at
        lambda = 0 where `derivative`; `runtime` and `identity` locate stored lower states where the engine uses
        them."""

    def sample(self, request: SampleRequest, *, batch_tokens: BatchTokens) -> Samples:
        """One batch of `request`'s seeded answers (`models.sampling.batched.Samples`), with the label probabilities and
        block outputs of the same pass where asked; refused by an engine that cannot sample."""
        raise self.refusal([Capability.SAMPLING], "sampling answers")
