"""The fast engines, for the families `architectures.FAST` lists (verified equal to the plain engine by
tests/test_conformance.py): the shared-prefix forward unsteered (`models.passes.prefix`), the split sweep with its exact
derivative steered (`models.passes.sweep`), started from the highest block at or below the edit whose lower states the
tensor cache holds for these prompts (`models.passes.states`), and the batched sampler (`models.sampling.batched`)."""

from __future__ import annotations

from collections.abc import Sequence

from llmaudit.models.engines.base import Capability, Engine, Parts
from llmaudit.models.memory import BatchTokens
from llmaudit.models.passes.attention import use_grouped
from llmaudit.models.passes.batching import ForwardOutput
from llmaudit.models.passes.prefix import forward_shared_prefix
from llmaudit.models.passes.required import required
from llmaudit.models.passes.states import LowerStates, store_states, stored_states
from llmaudit.models.passes.sweep import SweepOutput, split_sweep
from llmaudit.models.request import Edit, Keep, Request, Runtime, SampleRequest
from llmaudit.models.sampling.batched import Samples, sample_calls
from llmaudit.models.sampling.prefix_cache import PrefixCache


class FastEngine(Engine):
    """The verified fast engines of a local model."""

    name = "fast"
    capabilities = frozenset(Capability)

    def __init__(self, parts: Parts, reason: str):
        self.parts = parts
        self.reason = reason
        use_grouped(parts.handle.hf)  # chunked masked attention
        self.prefixes = PrefixCache()  # the sampler's latest beginning, continued by the next batch's

    def score(self, texts: Sequence[str], labels: Sequence[int] | None, layers: Sequence[int], *,
              batch_tokens: BatchTokens, desc: str | None = None, keep: Sequence[int] = ()) -> ForwardOutput:
        return forward_shared_prefix(self.parts.handle, texts, labels, layers, batch_tokens, desc, keep=keep)

    def sweep(self, request: Request, runtime: Runtime, identity: dict, *, outputs: bool,
              derivative: bool) -> SweepOutput:
        edit = required(request.edit, "the edit")
        start = _lower_states(request, runtime, identity)
        swept = split_sweep(self.parts.handle, request.texts, request.labels, edit.vector,
                            request.lambdas if outputs else (), request.targets if derivative else None,
                            edit.projection, runtime.batch_tokens, runtime.lambda_batch, request.desc,
                            request.layers if outputs else (), start=start,
                            keep=_kept_block(edit, request.keep, start))
        if swept.states is not None:
            store_states(runtime.cache, identity, request.texts, swept.states)
        return swept

    def sample(self, request: SampleRequest, *, batch_tokens: BatchTokens) -> Samples:
        return sample_calls(self.parts.handle, request, batch_tokens=batch_tokens, prefixes=self.prefixes)


def _lower_states(request: Request, runtime: Runtime, identity: dict) -> LowerStates | None:
    """The stored lower states of the request's prompts at the highest block a sweep can start from: at or below the
    edit's block and below every block it reads under it (None: none stored, the sweep starts from the tokens)."""
    edit = required(request.edit, "the edit")
    below = [layer for layer in request.layers if layer < edit.vector.layer]
    highest = min([edit.vector.layer, *(layer - 1 for layer in below)])
    return stored_states(runtime.cache, identity, request.texts, range(highest + 1))


def _kept_block(edit: Edit, keep: Keep | None, start: LowerStates | None) -> int | None:
    """The block whose states a sweep stores (`models.request.Keep`): the lowest of the kept blocks at or below the
    edit (none: the edit's block), where it ran that block (it started below it); None: none."""
    if keep is None:
        return None
    blocks = [block for block in keep.blocks if block <= edit.vector.layer] or [edit.vector.layer]
    block = min(blocks)
    return block if start is None or start.block < block else None
