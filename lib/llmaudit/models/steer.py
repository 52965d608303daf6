"""The one entry point of every scored forward pass, steered or not: `run_pass` takes a `models.request.Request`,
builds its tensor-cache key, returns the cached result or asks the model's engine (`models.engines`, chosen once as
the model loaded; a request it cannot answer is refused with one line), stores what it computed, and the engines
record their passes in the model's ledger. The cache, token budget and lambdas per upper pass come from the
`models.request.Runtime` the audit bound to the model (`AuditModel.runtime`)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from llmaudit.cache import store_tensors, stored_tensors
from llmaudit.models.engines import Capability
from llmaudit.models.passes.required import required
from llmaudit.models.passes.states import store_kept
from llmaudit.models.passes.sweep import SweepOutput
from llmaudit.models.request import Request
from llmaudit.models.runtime import AuditModel


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
    model.engine.require(_needs(request), f"the pass {request.desc!r}" if request.desc else "a scored pass")
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
    """The pass itself, by the model's engine: the outputs and the derivative where asked."""
    engine, runtime, texts = model.engine, model.runtime, request.texts
    if request.edit is not None:
        return engine.sweep(request, runtime, model.identity, outputs=outputs, derivative=derivative)
    keep = request.keep if engine.can(Capability.KEPT_STATES) else None  # other engines' sweeps start from the tokens
    wanted = () if keep is None else texts if keep.texts is None else keep.texts
    blocks = keep.blocks if keep is not None and wanted and set(wanted) <= set(texts) else ()
    out = engine.score(texts, request.labels, request.layers, batch_tokens=runtime.batch_tokens, desc=request.desc,
                       keep=blocks)
    if blocks:
        store_kept(runtime.cache, model.identity, texts, out.states, wanted)
    return SweepOutput(out.probs[None], None if out.acts is None else out.acts[None])


def _needs(request: Request) -> list[Capability]:
    """What an engine must be able to do to answer `request`."""
    return ([Capability.PROBABILITIES] + ([Capability.STATES] if request.layers else [])
            + ([Capability.EDITS] if request.edit is not None else [])
            + ([Capability.DERIVATIVE] if request.targets is not None else []))
