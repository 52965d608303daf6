"""The one entry point of every scored forward pass, steered or not: `steered` builds the pass's tensor-cache key,
returns the cached result or picks the engine (the traced forward for a remote model; for a local one whose family
the fast engines are verified for, the shared-prefix forward unsteered and the split sweep with its exact derivative
steered, started from stored lower states where the caller names the blocks its related passes share; for any other
local one the plain hooked forward, `models.plain`), stores what it computed, and the engines record their passes in
the model's ledger."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from llmaudit.cache import store_tensors, stored_tensors
from llmaudit.errors import AuditError
from llmaudit.models.memory import BatchTokens
from llmaudit.models.plain import hooked_sweep
from llmaudit.models.required import required
from llmaudit.models.runtime import AuditModel
from llmaudit.models.states import store_kept, store_states, stored_states
from llmaudit.models.sweep import SweepOutput, split_sweep
from llmaudit.models.vector import SteeringVector


@dataclass(frozen=True)
class Shared:
    """Lower states (`models.states`) that related passes over the same prompts share through the tensor cache. A
    sweep starts from those stored at the highest of `starts`, `keep` and its steering block that lies at or below
    the edit, and stores its own at `keep` (one block; none given: the steering block) when it started below it. An
    unsteered forward stores its prompts' states at blocks `keep`, of the prompts `of` (None: all of them)."""

    starts: tuple[int, ...] = ()
    keep: tuple[int, ...] = ()
    of: tuple[str, ...] | None = None


@dataclass
class Steered:
    """A pass's results, lambdas in the order asked (one row, None, for an unsteered pass): answer probabilities
    (lambdas, texts, labels), the last token's outputs of the blocks read (lambdas, texts, layers, width) or None,
    the steering block's after its edit, and the exact d metric / d lambda at lambda = 0 per text or None."""

    probs: torch.Tensor
    acts: torch.Tensor | None = None
    derivative: torch.Tensor | None = None


def steered(
    model: AuditModel,
    *,
    texts: Sequence[str],
    labels: Sequence[int],
    vector: SteeringVector | None = None,
    lambdas: Sequence[float | None] = (None,),
    projection: bool = True,
    layers: Sequence[int] = (),
    targets: Sequence[int] | None = None,
    cache: Path | None = None,
    shared: Shared | None = None,
    batch_tokens: BatchTokens = 4096,
    lambda_batch: int = 1,
    desc: str | None = None,
) -> Steered:
    """Next-token probabilities of `labels` (none: `layers` only) for chat-formatted `texts` and the last token's
    outputs of `layers`, unsteered without a `vector`, else steered along it at each of `lambdas` (None: unsteered)
    with the projection edit (`projection` False: the additive one); given each text's target answer (a local
    model's only), also the exact derivative at lambda = 0 (`models.derivative`). The probabilities and the
    derivative are cached apart under `cache` (None: no caching): a missing one is computed alone, both in one pass
    when both are missing. `shared`: the lower states this pass shares with related ones (None: none)."""
    if vector is None:
        lambdas = (None,)
    if targets is not None and (vector is None or model.hf is None):
        raise AuditError("the split sweep and exact sensitivities need a local model (not remote tracing) and a vector")
    key = {"model": model.identity, "prompts": list(texts), "labels": list(labels),
           "vector": None if vector is None else vector.fingerprint(),
           "edit": "projection" if projection else "additive"}
    outputs_key = key | {"layers": list(layers), "lambdas": list(lambdas)}
    derivative_key = key | {"result": "slope at 0"}
    found = stored_tensors(cache, outputs_key)
    slope = stored_tensors(cache, derivative_key) if targets is not None else None
    if found is None or (targets is not None and slope is None):
        out = _computed(model, texts, labels, vector, lambdas if found is None else (), projection,
                        layers if found is None else (), None if slope is not None else targets, cache, shared,
                        batch_tokens, lambda_batch, desc)
        if found is None:
            found = {"probs": out.probs} | ({"acts": required(out.acts, "block outputs")} if layers else {})
            store_tensors(cache, outputs_key, found)
        if targets is not None and slope is None:
            slope = {"slope0": required(out.derivative, "the derivative")}
            store_tensors(cache, derivative_key, slope)
    return Steered(found["probs"], found.get("acts"), None if slope is None else slope["slope0"])


def _computed(
    model: AuditModel, texts: Sequence[str], labels: Sequence[int], vector: SteeringVector | None,
    lambdas: Sequence[float | None], projection: bool, layers: Sequence[int], targets: Sequence[int] | None,
    cache: Path | None, shared: Shared | None, batch_tokens: BatchTokens, lambda_batch: int, desc: str | None,
) -> SweepOutput:
    """The pass itself, by the engine that fits it (see `steered`)."""
    if vector is None:
        kept = shared is not None and model.engine.fast  # the plain engine's sweeps start from the tokens
        out = model.forward(texts, labels, layers, batch_tokens=batch_tokens, desc=desc,
                            keep=shared.keep if shared is not None and kept else ())
        if shared is not None and kept:
            store_kept(cache, model.identity, texts, out.states, texts if shared.of is None else shared.of)
        return SweepOutput(out.probs[None], None if out.acts is None else out.acts[None])
    if model.hf is None:  # the traced forward, one lambda at a time
        outputs = [model.forward(texts, labels, layers, None if lam is None else vector.intervention(lam, projection),
                                 batch_tokens) for lam in lambdas]
        return SweepOutput(torch.stack([out.probs for out in outputs]),
                           torch.stack([required(out.acts, "block outputs") for out in outputs]) if layers else None)
    if not model.engine.fast:
        return hooked_sweep(model.handle, texts, labels, vector, lambdas, targets, projection, batch_tokens, desc,
                            layers)
    if shared is None:
        return split_sweep(model.handle, texts, labels, vector, lambdas, targets, projection, batch_tokens,
                           lambda_batch, desc, layers)
    keep = shared.keep[0] if shared.keep else vector.layer
    blocks = {b for b in shared.starts if b <= vector.layer} | {keep, vector.layer}
    start = stored_states(cache, model.identity, texts, blocks)
    swept = split_sweep(model.handle, texts, labels, vector, lambdas, targets, projection, batch_tokens, lambda_batch,
                        desc, layers, start=start, keep=keep if start is None or start.block < keep else None)
    if swept.states is not None:
        store_states(cache, model.identity, texts, swept.states)
    return swept
