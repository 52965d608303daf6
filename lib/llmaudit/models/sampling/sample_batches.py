"""How a sampling request's calls are split into batches that decode together: texts alike in length, the batch's
key/value cache and draws within the memory a pass of the token budget plans for."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from llmaudit.models.memory import BatchTokens, Shape, batch_budget
from llmaudit.models.passes.handle import Handle
from llmaudit.models.passes.prefix import shareable
from llmaudit.models.request import SampleCall

if TYPE_CHECKING:
    from transformers import PreTrainedModel


def call_batches(
    model: Handle, calls: Sequence[SampleCall], max_new_tokens: int, batch_tokens: BatchTokens
) -> Iterator[list[int]]:
    """Runs of call indices (a call larger than the budget alone) whose answers decode together, the calls taken
    longest text first (ties in their order), so that a batch's texts are alike in length: every answer's attention
    reads the batch's longest text, padding included, so short and long texts apart read less. A batch's
    key/value cache at the longest text plus `max_new_tokens`, with each row's draw over the vocabulary, takes no
    more memory than `memory.Shape.decode_bytes` allows for `batch_tokens` (`memory.batch_budget` for auto), and
    they are at most as many as its tokens. Their prefill runs in chunks of the budget (`_chunks`); a model whose
    caches cannot join (sliding windows) prefills a batch at once, so its batch also keeps its prefill (the
    beginning all texts share, once, then each text's own tokens padded to the longest) within the budget."""
    budget = batch_budget(model.hf, model.device, batch_tokens)
    shape = Shape.of(model.hf)
    room = shape.decode_bytes(budget, model.device)
    encoded = [model.encode(call.texts) for call in calls]
    shared = shareable(model.hf, [e for texts in encoded for e in texts], max_new_tokens) if calls else 0
    chunked = full_attention(model.hf)
    lengths = [max(len(e) for e in texts) for texts in encoded]
    batch: list[int] = []
    texts = rows = longest = 0
    for i in sorted(range(len(calls)), key=lambda i: -lengths[i]):
        call, length = calls[i], lengths[i]
        grown = (texts + len(call.texts), rows + call.rows, max(longest, length))
        if batch and (grown[1] > budget or grown[1] * shape.decode_row_bytes(grown[2] + max_new_tokens) > room
                      or not chunked and shared + grown[0] * (grown[2] - shared) > budget):
            yield batch
            batch, grown = [], (len(call.texts), call.rows, length)
        batch.append(i)
        texts, rows, longest = grown
    if batch:
        yield batch


def full_attention(hf: PreTrainedModel) -> bool:
    """Whether every block of the model attends over the whole sequence (no sliding window): its caches of
    different prefills join, left-padded (`models.sampling.reserved.joined`)."""
    config = getattr(hf.config, "text_config", hf.config)
    types = getattr(config, "layer_types", None) or []
    return all(kind == "full_attention" for kind in types) and getattr(config, "sliding_window", None) is None
