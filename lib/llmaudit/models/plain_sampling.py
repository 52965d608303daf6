"""Sampling for a family outside the fast engines' verified table: one transformers `generate` call per prompt
(temperature 1 over the whole vocabulary, after `torch.manual_seed(seed)`), which the batched sampler
(`models.sampling`) is verified to draw the same tokens as; the label probabilities and block outputs of the texts
and the states kept come from the plain hooked forward (`models.plain`)."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from llmaudit.models.batching import pad
from llmaudit.models.handle import Handle
from llmaudit.models.plain import hooked_forward
from llmaudit.models.sampling import SampleCall, Samples


def generated(model: Handle, call: SampleCall, max_new_tokens: int) -> torch.Tensor:
    """One call's answers, (rows, max_new_tokens) token ids, -1 from the end-of-sequence token on."""
    tokenizer = model.tokenizer
    ids, mask = pad(model.encode(call.texts), tokenizer.pad_token_id)
    torch.manual_seed(call.seed)
    with torch.inference_mode():
        out = model.hf.generate(  # type: ignore[operator]  # typed as a module attribute
            input_ids=ids.to(model.device), attention_mask=mask.to(model.device), do_sample=True, temperature=1.0,
            top_k=0, top_p=1.0, max_new_tokens=max_new_tokens, num_return_sequences=call.per_text,
            pad_token_id=tokenizer.pad_token_id)
    new = out[:, ids.shape[1]:].cpu()
    tokens = torch.full((len(new), max_new_tokens), -1, dtype=torch.long)
    tokens[:, : new.shape[1]] = new.masked_fill((new == tokenizer.eos_token_id).cumsum(-1) > 0, -1)
    return tokens


def plain_samples(model: Handle, calls: Sequence[SampleCall], max_new_tokens: int,
                  labels: Sequence[int] | None = None, layers: Sequence[int] = (), keep: Sequence[int] = ()) -> Samples:
    """What `models.sampling.sample_calls` gives, one `generate` call per prompt."""
    with model.ledger.labelled("plain: sample"):
        tokens = [generated(model, call, max_new_tokens) for call in calls]
    if labels is None and not layers and not keep:
        return Samples(tokens)
    out = hooked_forward(model, [text for call in calls for text in call.texts], labels, layers, keep=keep)
    return Samples(tokens, out.probs, out.acts, out.states)
