"""Batch sizes that fit by themselves. `batch_tokens: auto` sizes each pass's batches from the device's free memory and
a model of what a pass holds per token; and any engine that runs out of memory mid-call halves its batches and plans
the prompts it has not finished again, keeping those it has (as lm-evaluation-harness's `batch_size: auto` backs
off). What stays bounded whatever the batch: attention scores (`models.passes.attention` runs masked queries in chunks),
packed rows (at most `ROW_TOKENS`), states kept for later sweeps (moved to host memory batch by batch)."""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Literal, TypeVar

import torch

from llmaudit.models.passes.attention import SCORE_BYTES

if TYPE_CHECKING:
    from transformers import PreTrainedModel

AUTO: Final = "auto"
BatchTokens = int | Literal["auto"]

CPU_TOKENS = 4096  # auto on a CPU: larger batches gain nothing there, and this keeps its numbers those of earlier runs
MAX_TOKENS = 1 << 17  # auto never plans more (the batching's dynamic programme grows with batch_tokens / shortest row)
MIN_TOKENS = 64  # the smallest batch a pass backs off to before it gives up with a one-line error
ROW_TOKENS = 2048  # the longest packed row (token trees): its tree mask and its attention grow with its square
B = TypeVar("B")
USABLE = 0.8  # the share of free memory a plan fills: the allocator's fragmentation and the framework's own buffers
# On a CPU, the memory one sampling batch's decoding steps may hold, whatever the token budget (a speed setting there,
# `CPU_TOKENS`): a step runs one token a row, and its matrix products need a few hundred rows to run at a prefill's
# rate per token (framing's sampler, default model: 1.4x faster at 220 rows a batch than at 35).
HOST_DECODE_BYTES = 1 << 31


def is_out_of_memory(err: BaseException) -> bool:
    """Whether an error is an allocator's: torch's on a GPU, or a CPU allocation that failed."""
    return isinstance(err, torch.OutOfMemoryError) or (
        isinstance(err, RuntimeError) and "can't allocate memory" in str(err))


def release_cached() -> None:
    """Give the GPU allocator's cached blocks back after an out-of-memory error, so the retry starts unfragmented."""
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def free_bytes(device: str | torch.device) -> int:
    """Memory the device can still give: the GPU's free memory plus what PyTorch's allocator holds unused (earlier
    passes' cached blocks, which it hands out again), or the host's available memory for a CPU."""
    device = torch.device(device)
    if device.type == "cuda":
        cached = torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device)
        return torch.cuda.mem_get_info(device)[0] + cached
    try:
        with open("/proc/meminfo", encoding="ascii") as info:
            fields = dict(line.split(":", 1) for line in info)
        return int(fields["MemAvailable"].split()[0]) * 1024
    except (OSError, KeyError, ValueError):
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


@dataclass(frozen=True)
class Shape:
    """What a pass's memory depends on in a model: blocks, residual and MLP width, query and key/value width, the
    bytes of one number."""

    blocks: int
    width: int
    mlp: int
    queries: int
    keys: int
    item: int
    vocab: int = 0

    @classmethod
    def of(cls, hf: PreTrainedModel) -> Shape:
        """The shape of a transformers causal LM."""
        config = getattr(hf.config, "text_config", hf.config)
        heads = config.num_attention_heads
        head = getattr(config, "head_dim", None) or config.hidden_size // heads
        kv = getattr(config, "num_key_value_heads", None) or heads
        return cls(config.num_hidden_layers, config.hidden_size, config.intermediate_size, heads * head, kv * head,
                   torch.finfo(hf.dtype).bits // 8, config.vocab_size)

    def token_bytes(self, stacked: int = 1, derivative: bool = False) -> int:
        """Device memory one batch token needs in a pass: one block's working activations (residual and normed
        input, queries, keys and values, attention output, the MLP's gate, up and product) and the keys and values a
        cached pass keeps in every block, times the `stacked` copies a sweep runs at once (lambdas); a forward-mode
        derivative carries a tangent beside each activation and keeps no cache."""
        working = 4 * self.width + self.queries + 2 * self.keys + 3 * self.mlp
        if derivative:
            return stacked * 2 * working * self.item
        return stacked * (working + 2 * self.blocks * self.keys) * self.item

    def decode_row_bytes(self, length: int) -> int:
        """Device memory one answer row of a sampler's decoding steps holds at `length` tokens: its keys and values
        in every block, and per vocabulary entry its next-token logit and probability (float32) and its draw (on a
        GPU a float32 exponential; on a CPU an int64 uniform, its float32 bound and a flag: `models.sampling.race`)."""
        return length * self.kv_bytes + self.vocab * (4 + 4 + 8 + 4 + 1)

    @property
    def kv_bytes(self) -> int:
        """The keys and values one token holds in every block's cache."""
        return 2 * self.blocks * self.keys * self.item

    def decode_bytes(self, batch_tokens: int, device: str | torch.device) -> int:
        """The memory a sampler's decoding steps may hold: what a pass of `batch_tokens` tokens plans for (each step's
        activations are one token a row), and on a CPU at least `HOST_DECODE_BYTES`."""
        planned = batch_tokens * self.token_bytes()
        return max(planned, HOST_DECODE_BYTES) if torch.device(device).type == "cpu" else planned


def planned_tokens(shape: Shape, free: int, stacked: int = 1, derivative: bool = False) -> int:
    """The batch size in tokens a pass plans with `free` bytes: what `USABLE` of them hold beside the attention scores'
    budget, rounded down to a multiple of 64, within [MIN_TOKENS, MAX_TOKENS]."""
    room = USABLE * free - 2 * SCORE_BYTES
    tokens = int(room // shape.token_bytes(stacked, derivative)) // 64 * 64
    return max(MIN_TOKENS, min(MAX_TOKENS, tokens))


def batch_budget(hf: PreTrainedModel | None, device: str, requested: BatchTokens, stacked: int = 1,
                 derivative: bool = False) -> int:
    """The tokens of one batch: `requested` as given, or for `auto` the plan for the device's free memory (on a CPU,
    or for a remote model `hf` None, at most `CPU_TOKENS`)."""
    if requested != AUTO:
        return int(requested)
    if hf is None:
        return CPU_TOKENS
    tokens = planned_tokens(Shape.of(hf), free_bytes(device), stacked, derivative)
    return min(tokens, CPU_TOKENS) if torch.device(device).type == "cpu" else tokens


def backing_off(items: int, budget: int, plan: Callable[[list[int], int], Iterable[tuple[Sequence[int], B]]],
                run: Callable[[B, int], None]) -> None:
    """Run every batch `plan(indices, budget)` makes of items 0..items-1, as (the items it holds, the batch), through
    `run(batch, budget)`. A batch that runs out of memory halves the budget: the items no finished batch held are
    planned again, finished ones are kept. Below `MIN_TOKENS` it gives up, raising the allocator's error (which the
    engines' `batching.memory_guard` turns into one line)."""
    finished = [False] * items
    while True:
        left = [i for i in range(items) if not finished[i]]
        try:
            for members, batch in plan(left, budget):
                run(batch, budget)
                for i in members:
                    finished[i] = True
            return
        except RuntimeError as err:
            if not is_out_of_memory(err):
                raise
            if budget // 2 < MIN_TOKENS:
                raise
        release_cached()
        warnings.warn(f"out of memory at {budget} tokens a batch: going on at {budget // 2}", stacklevel=2)
        budget //= 2
