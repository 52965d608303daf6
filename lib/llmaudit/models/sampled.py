"""A sampling's batches, for the entry point `models.ask.ask`: `cached_samples` plans the calls of a
`models.request.SampleRequest` in batches (`sample_batches.call_batches`: texts alike in length, within the memory the
token budget plans for), answers each batch from the model's tensor cache or samples it (`AuditModel.sample`) and
stores it, so that an interrupted run keeps the batches done; it stores the lower states the request keeps for later
sweeps (`models.passes.states`) and returns every result in the request's order."""

from __future__ import annotations

from dataclasses import asdict, replace
from functools import partial

import torch
from tqdm import tqdm

from llmaudit.cache import cached_tensors
from llmaudit.capabilities import Capability
from llmaudit.models.passes.required import required
from llmaudit.models.passes.states import LowerStates, store_states
from llmaudit.models.request import Keep, SampleRequest
from llmaudit.models.runtime import AuditModel
from llmaudit.models.sampling.batched import Samples
from llmaudit.models.sampling.sample_batches import call_batches

CALLS = 64  # calls per batch where the engine samples over HTTP (an endpoint): one progress step, one cached batch


def cached_samples(model: AuditModel, request: SampleRequest) -> Samples:
    """The request's answers per call, the label probabilities of its texts (given labels) and their last token's
    outputs of its layers (given layers), rows in the request's order; each batch from the tensor cache where it holds
    it. The kept states (`Keep.blocks` of `Keep.texts`) go to the tensor cache, not into the result."""
    model.engine.require([Capability.SAMPLING], f"sampling {request.desc!r}" if request.desc else "sampling answers")
    calls, runtime = request.calls, model.runtime
    wanted = _kept_texts(request)
    wanting = set(wanted)
    tokens: list[torch.Tensor] = [torch.empty(0)] * len(calls)
    read = {name: [torch.empty(0)] * len(calls) for name in ("probs", "acts")}  # each call's texts' rows
    states: dict[int, dict[str, torch.Tensor]] = {}  # block -> text -> its states there
    batches = (list(call_batches(model.handle, calls, request.max_new_tokens, runtime.batch_tokens))
               if model.engine.can(Capability.STATES)  # an endpoint: CALLS calls' requests sent concurrently
               else [list(range(i, min(i + CALLS, len(calls)))) for i in range(0, len(calls), CALLS)])
    for batch in tqdm(batches, desc=request.desc, disable=request.desc is None, leave=False):
        chosen = [calls[i] for i in batch]
        kept = [text for call in chosen for text in call.texts if text in wanting]
        part = replace(request, calls=chosen, desc=None,
                       keep=Keep(blocks=_kept_blocks(request), texts=kept) if kept else None)
        found = cached_tensors(runtime.cache, _key(model, part), partial(_sampled, model, part))
        for i, rows in zip(batch, found["tokens"].split([call.rows for call in chosen])):
            tokens[i] = rows
        for name in ("probs", "acts"):
            for i, rows in zip(batch, found[name].split([len(call.texts) for call in chosen]) if name in found
                               else ()):
                read[name][i] = rows
        for block in _kept_blocks(part):
            lengths = found[f"lengths@{block}"].tolist()
            states.setdefault(block, {}).update(zip(kept, found[f"states@{block}"].split(lengths)))
    for block, of_text in states.items():
        store_states(runtime.cache, model.identity, wanted, LowerStates(block, [of_text[text] for text in wanted]))
    return Samples(tokens, torch.cat(read["probs"]) if request.labels is not None else None,
                   torch.cat(read["acts"]) if request.layers else None)


def _kept_texts(request: SampleRequest) -> list[str]:
    """The texts whose lower states the request keeps, in its order, each once."""
    if request.keep is None or not request.keep.blocks:
        return []
    texts = request.texts if request.keep.texts is None else request.keep.texts
    return list(dict.fromkeys(texts))


def _kept_blocks(request: SampleRequest) -> tuple[int, ...]:
    """The blocks whose lower states the request keeps."""
    return () if request.keep is None else tuple(request.keep.blocks)


def _key(model: AuditModel, part: SampleRequest) -> dict:
    """The tensor-cache key of one batch: the model and every field that can change an answer, and the states kept."""
    kept = None if part.keep is None else {"blocks": part.keep.blocks, "texts": part.keep.texts}
    return {"model": model.identity, "calls": [asdict(call) for call in part.calls],
            "max_new_tokens": part.max_new_tokens, "temperature": part.temperature, "top_k": part.top_k,
            "top_p": part.top_p, "labels": part.labels, "layers": part.layers, "keep": kept}


def _sampled(model: AuditModel, part: SampleRequest) -> dict[str, torch.Tensor]:
    """One batch sampled (`AuditModel.sample`): its tokens, label probabilities and block outputs where asked, and per
    block kept the states of the texts kept (one after another, with their lengths)."""
    out = model.sample(part)
    found = {"tokens": torch.cat(out.tokens)}
    if part.labels is not None:
        found["probs"] = required(out.probs, "label probabilities")
    if part.layers:
        found["acts"] = required(out.acts, "block outputs")
    texts = part.texts
    for block in _kept_blocks(part):
        of_block = required(out.states, "kept states")[block]
        kept = [of_block[texts.index(text)] for text in required(part.keep, "the states kept").texts or texts]
        found[f"states@{block}"] = torch.cat(kept)
        found[f"lengths@{block}"] = torch.tensor([len(state) for state in kept], dtype=torch.long)
    return found
