"""The one entry point of the model layer: `ask` takes any request (`models.request`: a scored pass, `Request`, steered
or not; or a sampling, `SampleRequest`), answers it from the model's tensor cache, keyed by the request's own fields,
or asks the model's engine (`models.engines`, chosen once as the model loaded; a request it cannot answer is refused
with one line), stores what it computed, and gives one `Outputs`. The engines record their passes in the model's
ledger; the cache, token budget and lambdas per upper pass come from the `models.request.Runtime` the audit bound to
the model (`AuditModel.runtime`). Sampling's batches are planned and cached by `models.sampled`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from llmaudit.cache import store_tensors, stored_tensors
from llmaudit.models.engines import Capability
from llmaudit.models.passes.required import required
from llmaudit.models.passes.states import store_kept
from llmaudit.models.passes.sweep import SweepOutput
from llmaudit.models.request import Request, SampleRequest
from llmaudit.models.runtime import AuditModel
from llmaudit.models.sampled import cached_samples


@dataclass(frozen=True, kw_only=True)
class Outputs:
    """What a request gives, lambdas in the order asked (one row, None, for an unsteered pass or a sampling): the
    next-token probabilities of its labels (lambdas, texts, labels; a sampling's from its prefill, (1, texts, 0)
    where it asks for none), the last token's outputs of the blocks read (lambdas, texts, layers, width) or None,
    the exact d metric / d lambda at lambda = 0 per text or None, and a sampling's answers: per call, its (rows,
    max_new_tokens) token ids, text-major, -1 from the end-of-sequence token on (none for a scored pass)."""

    probs: torch.Tensor
    acts: torch.Tensor | None = None
    derivative: torch.Tensor | None = None
    tokens: Sequence[torch.Tensor] = ()


def ask(model: AuditModel, request: Request | SampleRequest) -> Outputs:
    """The outputs `request` asks for, from the model's tensor cache where it holds them."""
    if isinstance(request, SampleRequest):
        return _sampled(model, request)
    return _scored(model, request)


def _sampled(model: AuditModel, request: SampleRequest) -> Outputs:
    """A sampling's answers, and its prefill's label probabilities and block outputs, with a lambda axis of one."""
    out = cached_samples(model, request)
    probs = torch.empty(len(request.texts), 0) if out.probs is None else out.probs
    return Outputs(probs=probs[None], acts=None if out.acts is None else out.acts[None], tokens=out.tokens)


def _scored(model: AuditModel, request: Request) -> Outputs:
    """A scored pass's outputs. The probabilities and the derivative are cached apart: a missing one is computed
    alone, both in one pass when both are missing."""
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
    return Outputs(probs=found["probs"], acts=found.get("acts"), derivative=None if slope is None else slope["slope0"])


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
