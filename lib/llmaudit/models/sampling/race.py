"""One draw per row of a probability table, the token `torch.multinomial(probs, 1, generator=g)` draws: PyTorch draws a
single sample as the argmax of the probabilities over as many Exp(1) draws from the generator (the exponential race,
"Gumbel-max"). On a CPU the exponentials are the cost (a logarithm each, one at a time from the generator's stream:
17 ns an entry on this project's machine), so there the race is run from the same stream's uniform integers instead,
each exponential worked out only where its entry can still win (`cpu_winners`). tests/test_sampling.py checks both
paths against multinomial."""

from __future__ import annotations

import torch

# PyTorch's CPU exponential of an entry: a 64-bit draw of the generator mod 2^53, over 2^53, is u; then -log1p(-u) in
# double precision, rounded to float32. `random_(0, 2**53)` takes the same 64-bit draw per entry and gives that integer.
UNIFORM_RANGE = 1 << 53
# How far below the best exact ratio found an entry's bound may fall and the entry still be worked out: the float32
# rounding of the bound and of the ratio is 2^-24 relative each, far inside this margin.
_MARGIN = 1e-5


def draw_one(probs: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """One token per row of `probs` (float32), the one `torch.multinomial(probs, 1, generator=generator)` draws, without
    multinomial's checks of its input (`sampling._Draws` checks the drawn probabilities are finite)."""
    if probs.device.type == "cpu":
        return cpu_winners(probs, uniforms(probs.shape, generator))
    race = torch.empty_like(probs).exponential_(1, generator=generator)
    return torch.div(probs, race, out=race).argmax(-1)


def uniforms(shape: torch.Size | tuple[int, ...], generator: torch.Generator,
             out: torch.Tensor | None = None) -> torch.Tensor:
    """The integers (int64, in `out` when given) behind as many of a CPU generator's exponential draws."""
    out = torch.empty(shape, dtype=torch.int64) if out is None else out
    return out.random_(0, UNIFORM_RANGE, generator=generator)


def _exponential(integers: torch.Tensor) -> torch.Tensor:
    """PyTorch's CPU Exp(1) draw (float32) from each of its integers."""
    return torch.log1p(integers.double().mul_(-1.0 / UNIFORM_RANGE)).neg_().float()


def cpu_winners(probs: torch.Tensor, integers: torch.Tensor) -> torch.Tensor:
    """Each row's argmax of probs / Exp(1) (the first, where several tie), the exponentials those of `integers`
    (`uniforms`, one per entry). An exponential is at least its uniform, so probs / uniform bounds each entry's ratio
    from above: the exact ratio of the entry with the highest bound is a floor, and only entries whose bound reaches
    it have their exponential worked out, typically a handful of the vocabulary, peaked or flat."""
    rows = torch.arange(len(probs))
    bound = torch.div(probs, integers.float(), out=torch.empty_like(probs))  # over 2^53 (a zero integer: infinite)
    top = bound.max(-1).indices  # NaN counts as the largest: a NaN row draws its NaN entry, as multinomial's race
    best = probs[rows, top] / _exponential(integers[rows, top])
    floor = (best * ((1 - _MARGIN) / UNIFORM_RANGE)).clamp(max=torch.finfo(torch.float32).max)
    candidate = bound >= floor[:, None]
    candidate[rows, top] = True
    row, column = candidate.nonzero(as_tuple=True)
    ratio = probs[row, column] / _exponential(integers[row, column])
    highest = torch.full((len(probs),), -torch.inf).scatter_reduce(0, row, ratio, "amax")
    winning = ratio == highest[row]
    first = torch.full((len(probs),), probs.shape[-1]).scatter_reduce(0, row[winning], column[winning], "amin")
    return torch.where(first < probs.shape[-1], first, top)  # a NaN row has no highest ratio: its NaN entry
