"""The one entry point of every scored forward pass, steered or not: `run_pass` takes a `models.request.Request`,
builds its tensor-cache key, returns the cached result or picks the engine (the traced forward for a remote model; for
a local one whose family the fast engines are verified for, the shared-prefix forward unsteered and the split sweep
with its exact derivative steered, started from the highest block at or below the edit whose lower states the tensor
cache holds for these prompts; for any other local one the plain hooked forward, `models.plain`), stores what it
computed, and the engines record their passes in the model's ledger. The cache, token budget and lambdas per upper
pass come from the `models.request.Runtime` the audit bound to the model (`AuditModel.runtime`)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from llmaudit.cache import store_tensors, stored_tensors
from llmaudit.errors import AuditError
from llmaudit.models.plain import hooked_sweep
from llmaudit.models.request import Edit, Keep, Request
from llmaudit.models.required import required
from llmaudit.models.runtime import AuditModel
from llmaudit.models.states import LowerStates, store_kept, store_states, stored_states
from llmaudit.models.sweep import SweepOutput, split_sweep


@dataclass
class Outputs:
    """A pass's results, lambdas in the order asked (one row, None, for an unsteered pass): answer probabilities
    (lambdas, texts, labels), the last token's outputs of the blocks read (lambdas, texts, layers, width) or None,
    the steering block's after its edit, and the exact d metric / d lambda at lambda = 0 per text or None."""

    probs: torch.Tensor
    acts: torch.Tensor | None = None
    derivative: torch.Tensor | None = None


def run_pass(model: AuditModel, request: Request) -> Outputs:
    """The outputs `request` asks for (`models.request.Request`), from the model's tensor cache where it holds them.
    The probabilities and the derivative are cached apart: a missing one is computed alone, both in one pass when
    both are missing."""
    edit, cache = request.edit, model.runtime.cache
    if request.targets is not None and model.hf is None:
        raise AuditError("the split sweep and exact sensitivities need a local model (not remote tracing) and a vector")
    key = {"model": model.identity, "prompts": list(request.texts), "labels": list(request.labels),
           "vector": None if edit is None else edit.vector.fingerprint(),
           "edit": "projection" if edit is None or edit.projection else "additive"}
    outputs_key = key | {"layers": list(request.layers), "lambdas": list(request.lambdas)}
    derivative_key = key | {"result": "slope at 0"}
    found = stored_tensors(cache, outputs_key)
    slope = stored_tensors(cache, derivative_key) if request.targets is not None else None
    if found is None or (request.targets is not None and slope is None):
        out = _computed(model, request, outputs=found is None, derivative=request.targets is not None and slope is None)
        if found is None:
            found = {"probs": out.probs} | ({"acts": required(out.acts, "block outputs")} if request.layers else {})
            store_tensors(cache, outputs_key, found)
        if request.targets is not None and slope is None:
            slope = {"slope0": required(out.derivative, "the derivative")}
            store_tensors(cache, derivative_key, slope)
    return Outputs(found["probs"], found.get("acts"), None if slope is None else slope["slope0"])


def _computed(model: AuditModel, request: Request, *, outputs: bool, derivative: bool) -> SweepOutput:
    """The pass itself, by the engine that fits it (see `run_pass`): the outputs and the derivative where asked."""
    texts, labels, runtime, edit = request.texts, request.labels, model.runtime, request.edit
    if edit is None:
        keep = request.keep if model.engine.fast else None  # the plain engine's sweeps start from the tokens
        wanted = () if keep is None else texts if keep.texts is None else keep.texts
        blocks = keep.blocks if keep is not None and wanted and set(wanted) <= set(texts) else ()
        out = model.forward(texts, labels, request.layers, batch_tokens=runtime.batch_tokens, desc=request.desc,
                            keep=blocks)
        if blocks:
            store_kept(runtime.cache, model.identity, texts, out.states, wanted)
        return SweepOutput(out.probs[None], None if out.acts is None else out.acts[None])
    lambdas = request.lambdas if outputs else ()
    layers = request.layers if outputs else ()
    targets = request.targets if derivative else None
    vector, projection = edit.vector, edit.projection
    if model.hf is None:  # the traced forward, one lambda at a time
        passes = [model.forward(texts, labels, layers, None if lam is None else vector.intervention(lam, projection),
                                runtime.batch_tokens) for lam in lambdas]
        return SweepOutput(torch.stack([out.probs for out in passes]),
                           torch.stack([required(out.acts, "block outputs") for out in passes]) if layers else None)
    if not model.engine.fast:
        return hooked_sweep(model.handle, texts, labels, vector, lambdas, targets, projection, runtime.batch_tokens,
                            request.desc, layers)
    start = _lower_states(model, request)
    swept = split_sweep(model.handle, texts, labels, vector, lambdas, targets, projection, runtime.batch_tokens,
                        runtime.lambda_batch, request.desc, layers, start=start,
                        keep=_kept_block(edit, request.keep, start))
    if swept.states is not None:
        store_states(runtime.cache, model.identity, texts, swept.states)
    return swept


def _lower_states(model: AuditModel, request: Request) -> LowerStates | None:
    """The stored lower states of the request's prompts at the highest block a sweep can start from: at or below the
    edit's block and below every block it reads under it (None: none stored, the sweep starts from the tokens)."""
    edit = required(request.edit, "the edit")
    below = [layer for layer in request.layers if layer < edit.vector.layer]
    highest = min([edit.vector.layer, *(layer - 1 for layer in below)])
    return stored_states(model.runtime.cache, model.identity, request.texts, range(highest + 1))


def _kept_block(edit: Edit, keep: Keep | None, start: LowerStates | None) -> int | None:
    """The block whose states a sweep stores (`models.request.Keep`): the lowest of the kept blocks at or below the
    edit (none: the edit's block), where it ran that block (it started below it); None: none."""
    if keep is None:
        return None
    blocks = [block for block in keep.blocks if block <= edit.vector.layer] or [edit.vector.layer]
    block = min(blocks)
    return block if start is None or start.block < block else None
