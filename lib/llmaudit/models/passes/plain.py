"""The plain hooked engine: the model's own forward on whole prompts, the steering edit made by a forward hook on the
steering block at every position (main paper §3.3), for any causal LM transformers loads. It shares no beginning,
packs no token trees and keeps no lower states: slower than the fast engines (`models.passes.sweep`,
`models.passes.prefix`), and the reference they are verified against (tests/test_conformance.py).

Prompts are right-padded: padding comes after every real token, so under causal attention no real token sees it, the
positions count from each prompt's first token and a sliding window covers exactly what it covers for the prompt
alone; only the positions some row ends at go through the unembedding (`logits_to_keep` as indices), and the model's
own head runs, final logit soft-capping (Gemma 2) included. The exact derivative at lambda = 0 is one reverse-mode
pass (autograd) per batch with one lambda per row in the hook's edit (rows are independent, so the gradient of their
summed metrics is each row's derivative): every operation a model runs has a backward, not every one has a forward-
mode derivative (mixture-of-experts grouped matrix products have none)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

import torch
from tqdm import tqdm

from llmaudit.ledger import call_label
from llmaudit.models.intervention import Intervention, edit_key
from llmaudit.models.loading import architectures
from llmaudit.models.memory import BatchTokens, backing_off, batch_budget
from llmaudit.models.passes.batching import ForwardOutput, activations_only, memory_guard, readout, token_batches
from llmaudit.models.passes.handle import Handle
from llmaudit.models.passes.layers import at_rows, every_position, hidden, reading, with_hidden
from llmaudit.models.passes.sweep import SweepOutput
from llmaudit.models.vector import SteeringVector

ENGINE = "plain"  # the engine's name in ledger labels


@contextmanager
def steering(block: torch.nn.Module, edit: Callable[[torch.Tensor], torch.Tensor] | None) -> Iterator[None]:
    """While open, `block`'s output is edited at every position by `edit` (None: not at all)."""
    handle = None if edit is None else block.register_forward_hook(
        lambda module, args, output: with_hidden(output, edit(hidden(output))))
    try:
        yield
    finally:
        if handle is not None:
            handle.remove()


def _batches(model: Handle, encoded: Sequence[Sequence[int]], budget: int, only: Sequence[int],
             desc: str | None) -> Iterator[tuple[list[int], torch.Tensor, torch.Tensor, torch.Tensor]]:
    """Length-sorted batches of `only` as (indices, right-padded ids, mask, each row's last real position)."""
    order = sorted(only, key=lambda i: -len(encoded[i]))
    label = None if desc is None else f"{desc} ['{model.hf.config.model_type}': plain hooked forward]"
    with tqdm(total=len(order), desc=label, disable=desc is None, leave=False) as bar:
        for batch in token_batches(order, [len(e) for e in encoded], budget):
            width = max(len(encoded[i]) for i in batch)
            ids = torch.full((len(batch), width), model.tokenizer.pad_token_id, dtype=torch.long)
            mask = torch.zeros((len(batch), width), dtype=torch.long)
            for row, i in enumerate(batch):
                ids[row, : len(encoded[i])] = torch.tensor(encoded[i])
                mask[row, : len(encoded[i])] = 1
            yield batch, ids.to(model.device), mask.to(model.device), mask.sum(1) - 1
            bar.update(len(batch))


def _last_logits(model: Handle, ids: torch.Tensor, mask: torch.Tensor, last: torch.Tensor) -> torch.Tensor:
    """The model's own logits at each row's last real position, (rows, vocab)."""
    keep = torch.unique(last)
    logits = model.hf(input_ids=ids, attention_mask=mask, use_cache=False,
                      logits_to_keep=keep.to(ids.device)).logits
    return at_rows(logits, torch.searchsorted(keep, last))


def hooked_forward(model: Handle, texts: Sequence[str], labels: Sequence[int] | None, layers: Sequence[int] = (),
                   edit: Intervention | None = None, batch_tokens: BatchTokens = 4096,
                   desc: str | None = None, keep: Sequence[int] = ()) -> ForwardOutput:
    """Label probabilities (log-probabilities over the vocabulary when `labels` is None) and the last token's outputs
    of `layers` (the steering block's after its edit) of chat-formatted `texts`, under `edit` (None: unsteered); and
    the outputs of blocks `keep` at every token (`ForwardOutput.states`)."""
    encoded = model.encode(texts)
    probs: list[torch.Tensor | None] = [None] * len(texts)
    acts: list[torch.Tensor | None] = [None] * len(texts)
    states: dict[int, list[torch.Tensor | None]] = {block: [None] * len(texts) for block in keep}
    blocks = architectures.blocks(model.hf)
    steered = None if edit is None else (edit.layer, [edit_key(edit)])

    def plan(left: list[int], budget: int) -> Iterator[tuple[list[int], tuple]]:
        for batch in _batches(model, encoded, budget, left, desc):
            yield batch[0], batch

    def run(batch: tuple, budget: int) -> None:
        members, ids, mask, last = batch
        with steering(blocks[edit.layer if edit is not None else 0], edit), \
                reading(blocks, layers, lambda h: at_rows(h, last)) as read, \
                reading(blocks, keep, every_position) as seen:
            logits = _last_logits(model, ids, mask, last)
        p, a = readout(None if activations_only(labels, layers) else logits, labels, [read[b] for b in layers])
        for row, i in enumerate(members):
            probs[i] = p[row]
            acts[i] = None if a is None else a[row]
            for block in keep:
                states[block][i] = seen[block][row, : len(encoded[i])].cpu()

    budget = batch_budget(model.hf, model.device, batch_tokens)
    with torch.inference_mode(), memory_guard(batch_tokens), \
            model.ledger.account(encoded, steered=steered, label=call_label(ENGINE, desc)):
        backing_off(len(encoded), budget, plan, run)
    return ForwardOutput(probs=torch.stack(probs),  # type: ignore[arg-type]
                         acts=torch.stack(acts) if layers else None,  # type: ignore[arg-type]
                         states=states or None)  # type: ignore[arg-type]


def hooked_sweep(model: Handle, texts: Sequence[str], labels: Sequence[int], vector: SteeringVector,
                 lambdas: Sequence[float | None], targets: Sequence[int] | None, projection: bool = True,
                 batch_tokens: BatchTokens = 4096, desc: str | None = None,
                 layers: Sequence[int] = ()) -> SweepOutput:
    """What `models.passes.sweep.split_sweep` computes (probabilities and block outputs per lambda, the exact derivative
    at lambda = 0 given `targets`), one plain hooked forward per lambda."""
    edits = [None if lam is None else vector.intervention(lam, projection) for lam in lambdas]
    outputs = [hooked_forward(model, texts, labels, layers, edit, batch_tokens, desc) for edit in edits]
    probs = torch.stack([out.probs for out in outputs]) if outputs else torch.empty(0, len(texts), len(labels))
    acts = torch.stack([out.acts for out in outputs]) if layers and outputs else None  # type: ignore[misc]
    slope = None if targets is None else \
        hooked_derivative(model, texts, labels, targets, vector, projection, batch_tokens, desc)
    return SweepOutput(probs, acts, slope)


def hooked_derivative(model: Handle, texts: Sequence[str], labels: Sequence[int], targets: Sequence[int],
                      vector: SteeringVector, projection: bool, batch_tokens: BatchTokens = 4096,
                      desc: str | None = None) -> torch.Tensor:
    """d metric / d lambda at lambda = 0 per text, metric = p[target] / sum(p) over `labels`."""
    encoded = model.encode(texts)
    out = torch.empty(len(texts))
    blocks = architectures.blocks(model.hf)

    def plan(left: list[int], budget: int) -> Iterator[tuple[list[int], tuple]]:
        for batch in _batches(model, encoded, budget, left, desc):
            yield batch[0], batch

    def run(batch: tuple, budget: int) -> None:
        members, ids, mask, last = batch
        chosen = torch.tensor([targets[i] for i in members], device=ids.device)
        lam = torch.zeros(len(members), device=ids.device, requires_grad=True)  # one lambda per row
        with steering(blocks[vector.layer], lambda h: at_zero(h) + (lam * vector.k)[:, None, None] * direction):
            logits = _last_logits(model, ids, mask, last)
        metric = torch.softmax(logits[:, list(labels)].float(), dim=-1).gather(-1, chosen[:, None])
        (slope,) = torch.autograd.grad(metric.sum(), lam)  # rows are independent: each row's own derivative
        out[members] = slope.flatten().cpu()

    at_zero = vector.intervention(0.0, projection)  # the edit at lambda is this plus lambda k v, in both forms
    direction = vector.direction.to(model.device, model.hf.dtype)
    edits = [("derivative", *edit_key(at_zero))]
    budget = batch_budget(model.hf, model.device, batch_tokens, derivative=True)
    with torch.enable_grad(), memory_guard(batch_tokens), \
            model.ledger.account(encoded, steered=(vector.layer, edits), label=call_label(ENGINE, desc)):
        backing_off(len(encoded), budget, plan, run)
    return out
