"""The sampler's prefix cache, as serving engines keep one: the last beginning a batch ran (its texts' common tokens:
chat template, instruction and a run's few-shot demonstrations), kept with its key/value cache so that the next batch
whose texts begin alike runs only what it adds. The batches of one markedness run (one seed's nine demonstrations of
one pool, `chapters.markedness.protocol`) all begin with the same demonstrations: they run once per run, not once
per batch; the runs of other seeds and pools reuse the instruction before them.

One entry, the latest beginning: a batch takes the longest part of it that its own beginning starts with
(`models.passes.prefix.Past.cropped`, exact: each position's keys and values depend on the tokens before it only)
and runs the rest after it; a model with sliding-window blocks (whose caches are not cut so simply) only where its
beginning is the kept one. The entry is dropped when any weight of the model has changed in place since it ran.

Beside it, the answers a `followed` request's texts are continued with (`models.sampling.continuations`): a later
text that begins with one of them runs only what it adds."""

from __future__ import annotations

from collections.abc import Sequence

from llmaudit.models.passes.handle import Handle
from llmaudit.models.passes.prefix import Past, common_prefix
from llmaudit.models.sampling.continuations import Continuations
from llmaudit.models.sampling.reserved import joinable


class PrefixCache:
    """The latest beginning run (one row), its tokens, and the weights' versions it ran with; the kept answers."""

    def __init__(self) -> None:
        self.answers = Continuations()
        self.tokens: list[int] = []
        self.past: Past | None = None
        self.weights: tuple[int, ...] = ()

    def beginning(self, model: Handle, tokens: Sequence[int], keep: Sequence[int] = ()) -> Past:
        """`Past.beginning(model, tokens, keep)`, continuing the kept beginning where `tokens` start as it does
        (and it kept the outputs of blocks `keep`); it then keeps this one."""
        tokens = list(tokens)
        weights = model.weight_versions()
        past = self.past
        usable = past is not None and weights == self.weights and set(keep) <= set(past.states) and bool(tokens)
        reused = common_prefix([self.tokens + [-1], tokens + [-2]]) if usable else 0
        if past is not None and reused < len(self.tokens) and past.cache is not None and not joinable(past.cache):
            reused = 0
        if past is None or not reused:
            found = Past.beginning(model, tokens, keep)
        else:
            found = past.cropped(reused).extended(model, tokens[reused:])
        if tokens:
            self.tokens, self.past, self.weights = tokens, found, weights
        return Past(found.cache, found.mask, {block: found.states[block] for block in keep})
