"""The traced engine, for a model NDIF runs remotely: every pass is nnsight's trace of the whole prompts
(`models.passes.traced`), one lambda at a time. It reads probabilities and block outputs and makes steering edits; it
takes no exact derivative, keeps no lower states and draws no samples."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from llmaudit.models.engines.base import Capability, Engine, Parts
from llmaudit.models.memory import BatchTokens
from llmaudit.models.passes.batching import ForwardOutput
from llmaudit.models.passes.required import required
from llmaudit.models.passes.sweep import SweepOutput
from llmaudit.models.request import Request, Runtime


class TracedEngine(Engine):
    """nnsight's trace, remote: the model's weights never leave NDIF."""

    name = "traced"
    capabilities = frozenset({Capability.PROBABILITIES, Capability.STATES, Capability.EDITS})

    def __init__(self, parts: Parts):
        self.parts = parts
        self.reason = f"{parts.tracer.source} runs remotely on NDIF: nnsight's trace of whole prompts"

    def score(self, texts: Sequence[str], labels: Sequence[int] | None, layers: Sequence[int], *,
              batch_tokens: BatchTokens, desc: str | None = None, keep: Sequence[int] = ()) -> ForwardOutput:
        return self.parts.tracer.forward(texts, labels, layers, None, batch_tokens, desc)

    def sweep(self, request: Request, runtime: Runtime, identity: dict, *, outputs: bool,
              derivative: bool) -> SweepOutput:
        if derivative:
            raise self.refusal([Capability.DERIVATIVE], "the exact sensitivity")
        edit = required(request.edit, "the edit")
        layers = request.layers if outputs else ()
        passes = [self.parts.tracer.forward(request.texts, request.labels, layers,
                                      None if lam is None else edit.vector.intervention(lam, edit.projection),
                                      runtime.batch_tokens)
                  for lam in (request.lambdas if outputs else ())]
        return SweepOutput(torch.stack([out.probs for out in passes]),
                           torch.stack([required(out.acts, "block outputs") for out in passes]) if layers else None)
