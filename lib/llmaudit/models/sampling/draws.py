"""The sampler's draws, step by step: each row's logits filtered as `generate` filters them (its own warpers, in its
order), then each call's draw from its own random stream (`models.sampling.race`)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from itertools import accumulate
from typing import TYPE_CHECKING, cast

import torch

from llmaudit.errors import AuditError
from llmaudit.models.request import SampleRequest
from llmaudit.models.sampling.race import cpu_winners, draw_one, uniforms

if TYPE_CHECKING:
    from transformers import LogitsProcessorList

_NO_IDS = cast(torch.LongTensor, torch.empty(0, dtype=torch.long))  # the warpers used here read no input ids


def warpers(request: SampleRequest) -> LogitsProcessorList:
    """The filters `generate(do_sample=True)` applies to the next-token logits for the request's temperature, top_k
    and top_p, transformers' own classes in its order and under its conditions (`_get_logits_processor`: temperature
    where it is not 1, top-k where set, top-p below 1, each keeping at least one token); none at the defaults."""
    from transformers import LogitsProcessorList, TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper

    found = LogitsProcessorList()
    if request.temperature != 1.0:
        found.append(TemperatureLogitsWarper(request.temperature))
    if request.top_k is not None:
        found.append(TopKLogitsWarper(top_k=request.top_k))
    if request.top_p < 1.0:
        found.append(TopPLogitsWarper(top_p=request.top_p))
    return found


class Draws:
    """The batch's draws, step by step: every call with a live answer row draws once over all its rows from its own
    generator, as `generate` draws over a batch with finished rows (an ended row's numbers are drawn and unused),
    from the logits filtered by `warpers` (row by row, so a batch of many calls filters as each call's alone). On
    a CPU the calls' uniform integers are drawn on as many threads as torch's (each call's stream is its own, so the
    tokens are the same) and the race is run on them at once (`race.cpu_winners`); on another device each call draws
    `race.draw_one`, an ended row from a dummy distribution whose draw is discarded."""

    def __init__(self, request: SampleRequest, call_of: torch.Tensor, device: torch.device | str) -> None:
        calls = request.calls
        self.call_of = call_of
        self.first = torch.tensor([0] + [call.rows for call in calls]).cumsum(0)  # each call's first answer row
        self.generators = [torch.Generator(device=device).manual_seed(call.seed) for call in calls]
        self.warpers = warpers(request)
        self.on_cpu = torch.device(device).type == "cpu"
        self.threads = torch.get_num_threads() if self.on_cpu else 1
        self.integers: torch.Tensor | None = None  # the CPU draws' buffer, kept from step to step

    def __call__(self, logits: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        """A token for each of the answer rows `rows` (ascending), whose next-token float32 logits `logits` holds in
        order. The full-vocabulary passes are the filters (none at the defaults), the softmax and the draw."""
        calls = self.call_of[rows]
        filtered = self.warpers(_NO_IDS, logits) if self.warpers else logits
        probs = torch.softmax(filtered, dim=-1)
        ids, counts = (t.tolist() for t in calls.unique_consecutive(return_counts=True))
        drawn = (self._on_cpu if self.on_cpu else self._on_device)(probs, rows, ids, counts)
        # a row with NaN (or an infinite logit, which softmax turns into NaN) draws a NaN entry: argmax takes NaN as
        # the largest value. multinomial refused such rows; checking the drawn entries costs one value a row.
        if not bool(torch.isfinite(probs[torch.arange(len(rows), device=probs.device), drawn]).all()):
            raise AuditError("the model's next-token probabilities hold NaN or infinity (its logits overflowed): "
                             "load it in float32 or bfloat16 rather than float16 (model.dtype in the params file)")
        return drawn

    def _on_cpu(self, probs: torch.Tensor, rows: torch.Tensor, ids: list[int], counts: list[int]) -> torch.Tensor:
        """Each drawing call's integers for all its rows in order, from its generator (a live row's into its row of
        the batch's buffer, an ended row's into a scratch row), then the race of the live rows."""
        vocab = probs.shape[-1]
        if self.integers is None or len(self.integers) < len(rows):
            self.integers = torch.empty(len(rows), vocab, dtype=torch.int64)
        integers = self.integers[: len(rows)]
        starts = [0, *accumulate(counts)]
        own = (rows - self.first[self.call_of[rows]]).tolist()  # each live row's index among its call's rows

        def fill(part: int) -> None:  # every `threads`-th call from the part-th
            scratch = torch.empty(1, vocab, dtype=torch.int64)
            for c, start, n in zip(ids[part:: self.threads], starts[part:: self.threads], counts[part:: self.threads]):
                generator, at, row = self.generators[c], start, 0  # where the call's next live row goes; its next row
                for first, run in _runs(own[start: start + n]):
                    for _ in range(row, first):  # ended rows before this run of live ones
                        uniforms(scratch.shape, generator, scratch)
                    uniforms((run, vocab), generator, integers[at: at + run])
                    at, row = at + run, first + run
                for _ in range(row, int(self.first[c + 1] - self.first[c])):
                    uniforms(scratch.shape, generator, scratch)

        _on_threads(fill, min(self.threads, len(ids)))
        return cpu_winners(probs, integers)

    def _on_device(self, probs: torch.Tensor, rows: torch.Tensor, ids: list[int], counts: list[int]) -> torch.Tensor:
        """Each drawing call's `draw_one` over its rows, the ended ones from a dummy distribution."""
        drawn = torch.empty(len(rows), dtype=torch.long, device=probs.device)
        for c, start, n in zip(ids, accumulate([0, *counts]), counts):
            size, own = int(self.first[c + 1] - self.first[c]), rows[start: start + n] - self.first[c]
            if n == size:  # every row of the call live: its probabilities as they are
                drawn[start: start + n] = draw_one(probs[start: start + n], self.generators[c])
            else:
                whole = torch.zeros(size, probs.shape[-1], device=probs.device)
                whole[:, 0] = 1.0
                whole[own.to(probs.device)] = probs[start: start + n]
                drawn[start: start + n] = draw_one(whole, self.generators[c])[own.to(probs.device)]
        return drawn


def _runs(rows: list[int]) -> Iterator[tuple[int, int]]:
    """The runs of consecutive numbers in ascending `rows`: (first, length) each."""
    first = 0
    for i in range(1, len(rows) + 1):
        if i == len(rows) or rows[i] != rows[i - 1] + 1:
            yield rows[first], i - first
            first = i


def _on_threads(work: Callable[[int], None], parts: int) -> None:
    """`work(part)` for each part on a thread of its own (in inference mode, which is per thread), or at once."""
    def run(part: int) -> None:
        with torch.inference_mode():
            work(part)

    if parts > 1:
        with ThreadPoolExecutor(parts) as pool:
            list(pool.map(run, range(parts)))
    else:
        run(0)
