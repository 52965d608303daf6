"""The steering-sweep engine: answer probabilities of many prompts under a steering vector at many coefficients.

A sweep's cost is forward passes, and most of a naive sweep is repeated work. Here

* the blocks below the steering layer run once per prompt, not once per lambda: their output does not
  depend on lambda (the edit happens above them);
* the blocks above run once per lambda on the edited hidden states, several lambdas stacked in one batch;
* only the last position goes through the final norm and the unembedding, and only the answer tokens'
  probabilities are kept.

The split forward reuses the model's own forward (embedding, rotary embedding, masks, decoder blocks), so it is
exactly the model's forward with the edit at the steering layer; `AuditModel.forward` with the same
intervention is the reference it is tested against (tests/test_sweep_architectures.py). Each part runs with the
blocks of the other part swapped for pass-throughs, not cut out of the layer list, because some models pick a
block's attention mask and rotary embedding by its position in the loop over `layers`: Qwen2, Ministral and
Gemma 3 index `config.layer_types[i]` with the loop counter `i` to choose between the sliding-window and the
global mask (and, in Gemma 3, between the local and the global rotary embedding), so a block run from a shortened
list would get the mask of another block. Llama and Mistral give every block the same mask. Gemma 3 scales the
token embeddings inside its embedding module, so the edited hidden states passed as `inputs_embeds` are not
rescaled. No KV cache is built (`use_cache=False`): nothing is generated, and a cache keyed by block index would
hold only the blocks run. The architectures in `SUPPORTED` are the ones whose forward was read and tested for
this; any other is refused, and the plain steered forward is its fallback. Models traced remotely cannot be split
and use that path.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import torch

from llmaudit.errors import AuditError
from llmaudit.models.runtime import AuditModel, memory_guard
from llmaudit.models.vector import SteeringVector

# `config.model_type`s whose split forward is verified to equal the plain steered forward.
SUPPORTED = frozenset({"llama", "qwen2", "mistral", "ministral", "gemma3_text"})


def sweep(
    model: AuditModel,
    texts: Sequence[str],
    labels: Sequence[int],
    vector: SteeringVector,
    lambdas: Sequence[float],
    projection: bool = True,
    batch_tokens: int = 4096,
    lambda_batch: int = 1,
    desc: str | None = None,
) -> torch.Tensor:
    """Next-token probabilities of `labels` for chat-formatted `texts` steered by `vector` at each lambda:
    a tensor (lambdas, texts, labels), texts in input order. Remote models run the plain steered forward per
    lambda; a local model of an architecture outside `SUPPORTED` is refused with an AuditError."""
    if model.hf is None:
        return torch.stack(
            [model.forward(texts, labels, intervention=vector.intervention(lam, projection),
                           batch_tokens=batch_tokens).probs for lam in lambdas]
        )
    return sweep_with_sensitivity(model, texts, labels, vector, lambdas, None, projection, batch_tokens,
                                  lambda_batch, desc)[0]


def sensitivity_at_zero(
    model: AuditModel,
    texts: Sequence[str],
    labels: Sequence[int],
    targets: Sequence[int],
    vector: SteeringVector,
    projection: bool = True,
    batch_tokens: int = 4096,
) -> torch.Tensor:
    """Exact d metric / d lambda at lambda = 0 for each text (see `sweep_with_sensitivity`)."""
    return sweep_with_sensitivity(model, texts, labels, vector, (), targets, projection, batch_tokens)[1]


def sweep_with_sensitivity(
    model: AuditModel,
    texts: Sequence[str],
    labels: Sequence[int],
    vector: SteeringVector,
    lambdas: Sequence[float],
    targets: Sequence[int] | None,
    projection: bool = True,
    batch_tokens: int = 4096,
    lambda_batch: int = 1,
    desc: str | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The sweep's probabilities (lambdas, texts, labels) and, given each text's target answer, the exact
    d metric / d lambda at lambda = 0 (metric = p[target] / sum(p) over `labels`), by one forward-mode
    derivative (torch.func.jvp) of the upper blocks along the edit's tangent k v. The blocks below the
    steering layer run once per batch for both."""
    if model.hf is None:
        raise AuditError("the split sweep and exact sensitivities need a local model (not remote tracing)")
    model_type = model.hf.config.model_type
    if model_type not in SUPPORTED:
        raise AuditError(
            f"the split sweep is not verified for architecture '{model_type}': run the plain steered forward"
            " (AuditModel.forward with intervention=...) instead"
        )
    probs = torch.empty(len(lambdas), len(texts), len(labels))
    derivative = torch.empty(len(texts)) if targets is not None else None
    with memory_guard(batch_tokens):
        for batch, (ids, mask, positions) in model.padded_batches(texts, batch_tokens, desc):
            with torch.inference_mode():
                with _blocks(model.hf, slice(0, vector.layer + 1), final_norm=False):
                    hidden = model.hf.model(input_ids=ids, attention_mask=mask, position_ids=positions,
                                            use_cache=False).last_hidden_state
                if lambdas:
                    probs[:, batch] = _upper_sweep(model, hidden, mask, positions, labels, vector, lambdas,
                                                   projection, lambda_batch)
            if derivative is not None:
                chosen = torch.as_tensor([targets[i] for i in batch], device=hidden.device)
                derivative[batch] = _upper_derivative(model, hidden.clone(), mask, positions, labels, chosen,
                                                      vector, projection)
    return probs, derivative


def _upper_sweep(
    model: AuditModel,
    hidden: torch.Tensor,
    mask: torch.Tensor,
    positions: torch.Tensor,
    labels: Sequence[int],
    vector: SteeringVector,
    lambdas: Sequence[float],
    projection: bool,
    lambda_batch: int,
) -> torch.Tensor:
    """(lambdas, batch, labels): the upper blocks on the edited hidden states, `lambda_batch` lambdas per pass."""
    results = []
    for start in range(0, len(lambdas), lambda_batch):
        group = lambdas[start : start + lambda_batch]
        edited = torch.cat([vector.intervention(lam, projection)(hidden) for lam in group])
        repeat = len(group)
        with _blocks(model.hf, slice(vector.layer + 1, None), final_norm=True):
            logits = model.hf(
                inputs_embeds=edited,
                attention_mask=mask.repeat(repeat, 1),
                position_ids=positions.repeat(repeat, 1),
                use_cache=False,
                logits_to_keep=1,
            ).logits[:, -1, :]
        probs = torch.softmax(logits.float(), dim=-1)[:, list(labels)]
        results.append(probs.reshape(repeat, len(hidden), len(labels)))
    return torch.cat(results).cpu()


def _upper_derivative(
    model: AuditModel,
    hidden: torch.Tensor,
    mask: torch.Tensor,
    positions: torch.Tensor,
    labels: Sequence[int],
    chosen: torch.Tensor,
    vector: SteeringVector,
    projection: bool,
) -> torch.Tensor:
    """d metric / d lambda at lambda = 0 of one batch, from the lower blocks' output `hidden`."""
    hf = model.hf
    start = vector.intervention(0.0, projection)(hidden)
    tangent = (vector.k * vector.direction).to(start.device, start.dtype).expand_as(start).contiguous()

    def metric(h: torch.Tensor) -> torch.Tensor:
        logits = hf(inputs_embeds=h, attention_mask=mask, position_ids=positions, use_cache=False,
                    logits_to_keep=1).logits
        probs = torch.softmax(logits[:, -1, list(labels)].float(), dim=-1)
        return probs.gather(-1, chosen.unsqueeze(-1)).squeeze(-1)

    with _blocks(hf, slice(vector.layer + 1, None), final_norm=True), _eager_attention(hf), torch.no_grad():
        _, derivative = torch.func.jvp(metric, (start,), (tangent,))
    return derivative.cpu()


class _PassThrough(torch.nn.Module):
    """Stands in for a decoder block that is not run: returns the hidden states it is given."""

    def forward(self, hidden_states: torch.Tensor, *args: object, **kwargs: object) -> torch.Tensor:
        """The input hidden states, unchanged."""
        return hidden_states


@contextmanager
def _blocks(hf, which: slice, final_norm: bool) -> Iterator[None]:
    """Temporarily run only the decoder blocks in `which` (and the final norm or not), the others replaced by
    pass-throughs: every block keeps its index in the layer list, so the model's own forward gives it the same
    mask and position embeddings as in the full forward. The model is restored on exit, also after an error."""
    inner = hf.model
    layers, norm = inner.layers, inner.norm
    kept = set(range(len(layers))[which])
    skip = _PassThrough()
    try:
        inner.layers = torch.nn.ModuleList([block if i in kept else skip for i, block in enumerate(layers)])
        if not final_norm:
            inner.norm = torch.nn.Identity()
        yield
    finally:
        inner.layers, inner.norm = layers, norm


@contextmanager
def _eager_attention(hf) -> Iterator[None]:
    """Plain-PyTorch attention for the duration (fused attention kernels have no forward-mode derivative)."""
    previous = hf.config._attn_implementation
    hf.config._attn_implementation = "eager"
    try:
        yield
    finally:
        hf.config._attn_implementation = previous
