"""Batches of prompts for one forward pass: the output type, padding, token-budgeted batches, the readout of
answer probabilities and activations, and the out-of-memory message every engine shares."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import torch

from llmaudit.errors import AuditError
from llmaudit.models.memory import MIN_TOKENS, BatchTokens, is_out_of_memory


@dataclass
class ForwardOutput:
    """`probs`: (n, labels) next-token probabilities, over the whole vocabulary (n, vocab) when no labels were asked
    for (probabilities either way, so that one field has one meaning);
    `acts`: (n, blocks, width) residual stream at the last prompt token for the requested blocks; `states`: per
    block kept, each prompt's residual stream at every token (tokens, width), where the engine keeps them."""

    probs: torch.Tensor
    acts: torch.Tensor | None
    states: dict[int, list[torch.Tensor]] | None = None


@contextmanager
def memory_guard(batch_tokens: BatchTokens) -> Iterator[None]:
    """Turn running out of GPU or CPU memory mid-batch into a one-line error naming the setting to lower."""
    try:
        yield
    except RuntimeError as err:  # torch.OutOfMemoryError is a RuntimeError, and so is the CPU allocator's failure
        if not is_out_of_memory(err):
            raise
        raise AuditError(
            f"out of memory with batch_tokens={batch_tokens} (batches halved down to {MIN_TOKENS} tokens): lower"
            " batch_tokens in the params file (or tasks.lambda_batch, which multiplies it in sweeps), or free the"
            " device's memory"
        ) from None


def activations_only(labels: Sequence[int] | None, layers: Sequence[int]) -> bool:
    """Whether a forward reads block outputs but no answer: an empty label list with layers to read (None asks for
    the whole vocabulary). Such a forward needs no block above the deepest layer read, and no unembedding."""
    return labels is not None and len(labels) == 0 and len(layers) > 0


def readout(
    logits: torch.Tensor | None, labels: Sequence[int] | None, acts: Sequence[torch.Tensor]
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """On the CPU: the probabilities of `labels` (of the whole vocabulary when None) from (n, vocab)
    last-position logits (None for `activations_only`: an (n, 0) result), and the block outputs `acts`, each
    (n, width) and maybe on its own device, stacked as (n, blocks, width); None when there are none."""
    if logits is None:
        probs = torch.empty(len(acts[0]), 0)
    else:
        log_probs = torch.log_softmax(logits.float(), dim=-1)
        probs = (log_probs if labels is None else log_probs[:, list(labels)]).exp()
    return probs.cpu(), torch.stack([a.float().cpu() for a in acts], dim=1) if acts else None


def pad(encoded: Sequence[Sequence[int]], pad_id: int, left: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """Pad token lists into (ids, attention mask); left padding puts every row's last token at position -1."""
    width = max(len(e) for e in encoded)
    ids = torch.full((len(encoded), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(encoded), width), dtype=torch.long)
    for row, tokens in enumerate(encoded):
        where = slice(width - len(tokens), width) if left else slice(0, len(tokens))
        ids[row, where] = torch.tensor(tokens, dtype=torch.long)
        mask[row, where] = 1
    return ids, mask


# What one more batch costs beside its tokens (calls, smaller matrix products), in token positions: the batching
# below takes a batch boundary where it saves more padding than this.
BATCH_OVERHEAD = 64


def token_batches(order: list[int], lengths: list[int], batch_tokens: int,
                  computed: list[int] | None = None) -> Iterator[list[int]]:
    """Consecutive runs of `order` (best sorted longest first) whose padded batch, rows times the longest of
    `lengths`, holds at most `batch_tokens` tokens (a longer row alone), cut where they compute the fewest padded
    positions (rows times the longest of `computed`, default `lengths`) plus `BATCH_OVERHEAD` per batch. Filling
    each batch to the budget would pad a long row's batch-mates to its length: with long-tailed lengths, a
    quarter of the positions (dynamic programming over the cut points; a batch holds at most
    batch_tokens / shortest rows, so the cost is linear in the number of rows)."""
    computed = lengths if computed is None else computed
    best = [0] + [0] * len(order)  # best[j]: the least cost of the first j rows
    cut = [0] * (len(order) + 1)  # cut[j]: where the last batch of that best begins
    for j in range(1, len(order) + 1):
        longest = widest = 0
        best[j] = -1
        for i in range(j - 1, -1, -1):  # the last batch: rows i .. j-1
            longest, widest = max(longest, lengths[order[i]]), max(widest, computed[order[i]])
            if i < j - 1 and (j - i) * longest > batch_tokens:
                break
            cost = best[i] + (j - i) * widest + BATCH_OVERHEAD
            if best[j] < 0 or cost < best[j]:
                best[j], cut[j] = cost, i
    batches, j = [], len(order)
    while j > 0:
        batches.append(order[cut[j]:j])
        j = cut[j]
    yield from reversed(batches)
