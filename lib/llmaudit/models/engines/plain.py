"""The plain engine, for every family outside the fast engines' verified table: the model's own forward on whole
prompts with the edit made by a forward hook (`models.passes.plain`), and one transformers `generate` call per prompt
for samples (`models.sampling.plain_sampling`). It keeps no lower states: its sweeps start from the tokens."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from llmaudit.models.engines.base import Capability, Engine, Parts
from llmaudit.models.memory import BatchTokens
from llmaudit.models.passes.batching import ForwardOutput
from llmaudit.models.passes.plain import hooked_forward, hooked_sweep
from llmaudit.models.passes.required import required
from llmaudit.models.passes.sweep import SweepOutput
from llmaudit.models.request import Request, Runtime, SampleRequest
from llmaudit.models.sampling.batched import Samples
from llmaudit.models.sampling.plain_sampling import plain_samples


class PlainEngine(Engine):
    """The plain hooked forward of a local model: slower than the fast engines, exact, and their reference."""

    name = "plain"
    capabilities = frozenset(Capability) - {Capability.KEPT_STATES}

    def __init__(self, parts: Parts, reason: str, *, model: str):
        self.parts = parts
        self.reason = reason
        print(f"llmaudit: {model}: {reason} (slower, exact)", file=sys.stderr)

    def score(self, texts: Sequence[str], labels: Sequence[int] | None, layers: Sequence[int], *,
              batch_tokens: BatchTokens, desc: str | None = None, keep: Sequence[int] = ()) -> ForwardOutput:
        return hooked_forward(self.parts.handle, texts, labels, layers, None, batch_tokens, desc, keep)

    def sweep(self, request: Request, runtime: Runtime, identity: dict, *, outputs: bool,
              derivative: bool) -> SweepOutput:
        edit = required(request.edit, "the edit")
        return hooked_sweep(self.parts.handle, request.texts, request.labels, edit.vector,
                            request.lambdas if outputs else (), request.targets if derivative else None,
                            edit.projection, runtime.batch_tokens, request.desc, request.layers if outputs else ())

    def sample(self, request: SampleRequest, *, batch_tokens: BatchTokens) -> Samples:
        return plain_samples(self.parts.handle, request)
