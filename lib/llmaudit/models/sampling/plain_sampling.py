"""Sampling for a family outside the fast engines' verified table: one transformers `generate` call per prompt (with
the request's temperature, top-k and top-p, after `torch.manual_seed(seed)`), which the batched sampler
(`models.sampling.batched`) is verified to draw the same tokens as; the label probabilities and block outputs of the
texts and the states kept come from the plain hooked forward (`models.passes.plain`)."""

from __future__ import annotations

import torch

from llmaudit.models.passes.batching import pad
from llmaudit.models.passes.handle import Handle
from llmaudit.models.passes.plain import hooked_forward
from llmaudit.models.request import SampleCall, SampleRequest
from llmaudit.models.sampling.batched import Samples


def generated(model: Handle, call: SampleCall, request: SampleRequest) -> torch.Tensor:
    """One call's answers drawn as the request asks, (rows, max_new_tokens) token ids, -1 from the end-of-sequence
    token on. top_k 0 and top_p 1 turn `generate`'s filters off (the model's generation config may set others)."""
    tokenizer, new = model.tokenizer, request.max_new_tokens
    ids, mask = pad(model.encode(call.texts), tokenizer.pad_token_id)
    torch.manual_seed(call.seed)
    with torch.inference_mode():
        out = model.hf.generate(  # type: ignore[operator]  # typed as a module attribute
            input_ids=ids.to(model.device), attention_mask=mask.to(model.device), do_sample=True,
            temperature=request.temperature, top_k=request.top_k or 0, top_p=request.top_p, max_new_tokens=new,
            num_return_sequences=call.per_text, pad_token_id=tokenizer.pad_token_id)
    fresh = out[:, ids.shape[1]:].cpu()
    tokens = torch.full((len(fresh), new), -1, dtype=torch.long)
    tokens[:, : fresh.shape[1]] = fresh.masked_fill((fresh == tokenizer.eos_token_id).cumsum(-1) > 0, -1)
    return tokens


def plain_samples(model: Handle, request: SampleRequest) -> Samples:
    """What `models.sampling.batched.sample_calls` gives, one `generate` call per prompt."""
    with model.ledger.labelled("plain: sample"):
        tokens = [generated(model, call, request) for call in request.calls]
    keep = () if request.keep is None else request.keep.blocks
    if request.labels is None and not request.layers and not keep:
        return Samples(tokens)
    out = hooked_forward(model, request.texts, request.labels, request.layers, keep=keep)
    return Samples(tokens, out.probs, out.acts, out.states)
