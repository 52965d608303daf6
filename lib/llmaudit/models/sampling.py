"""Seeded sampling of many prompts in one batch, each prompt's answers drawn exactly as one `generate` call draws them
for that prompt alone (at the call's temperature, 1 unless set, over the whole vocabulary, after
`torch.manual_seed(seed)`).

A `generate` call with `num_return_sequences = n` runs its prompt n times and decodes one small batch per prompt.
Here every text is computed once, each beginning texts share once (`models.prefix`: the beginning of all the batch's
texts, the branches some share, e.g. one question with its options in other orders), in chunks of the token budget;
the chunks' key/value caches join into one with room reserved for the tokens to come (`models.reserved`), each
text's rows are copied to its answers, and the answers of many prompts decode together, as many as the memory a pass
of the budget plans for holds in cache and draws (on a CPU at least `memory.HOST_DECODE_BYTES`: `call_batches`).
Answers that have ended leave the batch once a tenth of it has. Each prompt keeps its own random stream: a
generator of the model's device seeded as `generate` would seed it, asked at every step, until all the prompt's
answers have ended, for one draw over its rows in the (rows, vocabulary) shape `generate` asks for (an ended answer
takes part with a dummy row whose token is discarded). So the draws use the same random numbers and give the same
tokens, up to float rounding of the probabilities (tests/test_sampling.py compares the two). The prefill's last
position is also the next-token distribution a scoring pass over the same texts reads: it gives the texts' label
probabilities and block outputs too, so a chapter that scores and samples the same prompts runs them once."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from itertools import accumulate
from typing import TYPE_CHECKING

import torch

from llmaudit.errors import AuditError
from llmaudit.models import architectures
from llmaudit.models.batching import pad, readout, token_batches
from llmaudit.models.handle import Handle
from llmaudit.models.layers import at_rows, every_position, reading
from llmaudit.models.memory import BatchTokens, Shape, batch_budget, is_out_of_memory, release_cached
from llmaudit.models.packing import window_covers
from llmaudit.models.prefix import Past, branches, shareable
from llmaudit.models.race import cpu_winners, draw_one, uniforms
from llmaudit.models.required import required
from llmaudit.models.reserved import joined

if TYPE_CHECKING:
    from transformers import PreTrainedModel
    from transformers.cache_utils import Cache


@dataclass
class Samples:
    """Per call, (rows, max_new_tokens) sampled token ids, text-major, -1 from the end-of-sequence token on; and per
    text (the calls' texts in order), when labels or layers were asked for, the first generated position's
    probabilities of the labels and the last prompt token's block outputs (texts, layers, width); per block kept,
    each text's outputs at every prompt token (tokens, width), for a sweep of the same texts to start from."""

    tokens: list[torch.Tensor]
    probs: torch.Tensor | None = None
    acts: torch.Tensor | None = None
    states: dict[int, list[torch.Tensor]] | None = None

    def followed_by(self, other: Samples) -> Samples:
        """These samples, then `other`'s, as one call of both calls' lists would give them."""
        def joined(a: torch.Tensor | None, b: torch.Tensor | None) -> torch.Tensor | None:
            return None if a is None else torch.cat([a, required(b, "the second call's results")])

        states = None if self.states is None else {
            b: s + required(other.states, "the second call's states")[b] for b, s in self.states.items()}
        return Samples(self.tokens + other.tokens, joined(self.probs, other.probs), joined(self.acts, other.acts),
                       states)


@dataclass(frozen=True)
class SampleCall:
    """One prompt's sampling: its chat-formatted texts (one, or one per answer, e.g. shuffled option orders), the
    answers drawn per text, the seed of its random stream and the temperature that divides its logits (as
    `generate(temperature=...)` does)."""

    texts: tuple[str, ...]
    per_text: int
    seed: int
    temperature: float = 1.0

    @property
    def rows(self) -> int:
        """How many answers the call draws."""
        return len(self.texts) * self.per_text


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
    different prefills join, left-padded (`models.reserved.joined`)."""
    config = getattr(hf.config, "text_config", hf.config)
    types = getattr(config, "layer_types", None) or []
    return all(kind == "full_attention" for kind in types) and getattr(config, "sliding_window", None) is None


def sample_calls(model: Handle, calls: Sequence[SampleCall], max_new_tokens: int,
                 labels: Sequence[int] | None = None, layers: Sequence[int] = (), keep: Sequence[int] = (), *,
                 batch_tokens: BatchTokens) -> Samples:
    """The calls' sampled answers (each text's answers together) and, given `labels` or `layers`, each text's label
    probabilities (over the whole vocabulary when `labels` is None, as `forward` gives them) and block
    outputs read from the same prefill, which also keeps the outputs of blocks `keep` at every prompt token. All
    calls decode as one batch (`call_batches` splits a long list), prefilled in chunks of `batch_tokens`; a batch
    that runs out of memory runs again as two halves, which draw the same answers (each call keeps its own random
    stream)."""
    try:
        budget = batch_budget(model.hf, model.device, batch_tokens)
        return _sample_together(model, calls, max_new_tokens, labels, layers, keep, budget)
    except RuntimeError as err:
        if not is_out_of_memory(err):
            raise
        if len(calls) == 1:
            raise AuditError(f"out of memory sampling {calls[0].rows} answers of one prompt: lower the answers or "
                             "their length in the params file") from None
    release_cached()
    warnings.warn(f"out of memory sampling {len(calls)} prompts together: going on in two halves", stacklevel=2)
    half = len(calls) // 2
    first, second = (sample_calls(model, part, max_new_tokens, labels, layers, keep, batch_tokens=batch_tokens)
                     for part in (calls[:half], calls[half:]))
    return first.followed_by(second)


def _sample_together(model: Handle, calls: Sequence[SampleCall], max_new_tokens: int,
                     labels: Sequence[int] | None, layers: Sequence[int], keep: Sequence[int], budget: int) -> Samples:
    """`sample_calls` in one batch. The draws run on the model's device, each call's from a generator of that device
    seeded as `generate` seeds it there. An answer that ends stays in the batch, its token discarded, until a tenth
    of the batch has ended: then the ended rows leave it (a copy of the live rows' key/value cache)."""
    hf, eos, device = model.hf, model.tokenizer.eos_token_id, model.device
    encoded = model.encode([text for call in calls for text in call.texts])
    text_of = torch.tensor([t for t, n in enumerate(n for call in calls for n in [call.per_text] * len(call.texts))
                            for _ in range(n)])  # answer row -> its text
    call_of = torch.tensor([c for c, call in enumerate(calls) for _ in range(call.rows)])  # answer row -> its call
    draw = _Draws(calls, call_of, device)
    tokens = torch.full((len(call_of), max_new_tokens), -1, dtype=torch.long)
    with torch.inference_mode(), model.ledger.labelled("sample"):
        prefilled, row_of = _prefilled(model, encoded, max_new_tokens, layers, keep, budget)
        cache, states = prefilled.cache, prefilled.states
        asked = labels is not None or layers
        probs, acts = readout(prefilled.logits, labels, prefilled.read) if asked else (None, None)
        cache.batch_select_indices(row_of[text_of].to(device))  # each text's row once per answer
        logits, mask = prefilled.logits[text_of.to(device)], prefilled.mask[row_of[text_of]]
        held = torch.arange(len(call_of))  # the answer rows in the batch, in order
        going = torch.ones(len(held), dtype=torch.bool)  # which of them are still being answered
        for step in range(max_new_tokens):
            at = going.nonzero().squeeze(-1)
            drawn = draw(logits[at.to(device)], held[at]).cpu()
            tokens[held[at], step] = drawn
            going[at[drawn == eos]] = False
            if step == max_new_tokens - 1 or not going.any():
                break
            ids = torch.full((len(held),), model.tokenizer.pad_token_id, dtype=torch.long)
            ids[at] = drawn  # an ended row's next input, whose output is never read
            if int(going.sum()) <= 9 * len(held) // 10:
                kept = going.nonzero().squeeze(-1)
                held, going, mask, ids = held[kept], going[kept], mask[kept], ids[kept]
                cache.batch_select_indices(kept.to(device))
            mask = torch.cat([mask, torch.ones(len(held), 1, dtype=mask.dtype)], dim=1)
            logits = hf(input_ids=ids[:, None].to(device), attention_mask=mask.to(device),
                        position_ids=(mask.sum(-1, keepdim=True) - 1).to(device), past_key_values=cache,
                        use_cache=True, logits_to_keep=1).logits[:, -1].float()
        tokens = tokens.masked_fill((tokens == eos).cumsum(-1) > 0, -1)
        # needed: each text, and each answer up to its last token (whose successor is never asked for)
        model.ledger.need([encoded[t] + [x for x in row if x >= 0][:-1] for t, row in zip(text_of.tolist(),
                                                                                           tokens.tolist())])
    return Samples(list(tokens.split([call.rows for call in calls])), probs, acts, states or None)


@dataclass
class _Prefill:
    """A prefill's last real position's float32 logits (on the model's device), key/value cache, attention mask
    (whose sum is each text's length), last real position's outputs of the layers read and each text's outputs of
    the blocks kept at all its tokens (on the CPU)."""

    logits: torch.Tensor
    cache: Cache
    mask: torch.Tensor
    read: list[torch.Tensor]
    states: dict[int, list[torch.Tensor]]


def _prefilled(model: Handle, encoded: list[list[int]], extra: int, layers: Sequence[int], keep: Sequence[int],
               budget: int) -> tuple[_Prefill, torch.Tensor]:
    """`_prefill` of the texts in chunks of the budget (`_chunks`) after the beginning they all share, run once,
    their caches joined with room for `extra` positions (`models.reserved.joined`) and their masks left-padded to
    match: the logits, block outputs and states in the texts' order, the cache and mask in the chunks' order; and the
    row of each text in those."""
    shared = shareable(model.hf, encoded, extra)
    beginning = Past.beginning(model, encoded[0][:shared], keep)
    chunks = _chunks(model.hf, encoded, shared, budget)
    parts = [_prefill(model, [encoded[t] for t in chunk], extra, layers, beginning) for chunk in chunks]
    row_of = torch.empty(len(encoded), dtype=torch.long)
    row_of[[t for chunk in chunks for t in chunk]] = torch.arange(len(encoded))

    def in_order(tensors: list[torch.Tensor]) -> torch.Tensor:
        joined_ = torch.cat(tensors)
        return joined_[row_of.to(joined_.device)]

    width = max(part.mask.shape[1] for part in parts)
    kept = {block: [state for part in parts for state in part.states[block]] for block in keep}
    return _Prefill(
        in_order([part.logits for part in parts]), joined([part.cache for part in parts], extra),
        torch.cat([torch.nn.functional.pad(part.mask, (width - part.mask.shape[1], 0)) for part in parts]),
        [in_order([part.read[i] for part in parts]) for i in range(len(layers))],
        {block: [kept[block][row] for row in row_of.tolist()] for block in keep}), row_of


def _chunks(hf: PreTrainedModel, encoded: Sequence[Sequence[int]], shared: int, budget: int) -> list[list[int]]:
    """The texts to prefill together after the `shared` tokens they all begin with: where the model's caches join
    (`full_attention`), runs of them longest first whose own tokens padded to the longest fit the budget's room
    beside those, cut where they save padding (`batching.token_batches`); else all at once."""
    if len(encoded) == 1 or not full_attention(hf):
        return [list(range(len(encoded)))]
    order = sorted(range(len(encoded)), key=lambda t: -len(encoded[t]))
    return list(token_batches(order, [len(e) - shared for e in encoded], max(1, budget - shared)))


def _prefill(model: Handle, encoded: list[list[int]], extra: int, layers: Sequence[int], beginning: Past) -> _Prefill:
    """Every text once, each shared beginning once (`models.prefix`): after `beginning` (the tokens all the batch's
    texts begin with, already run, keeping the outputs of the blocks kept), where some texts share more and the
    model's window covers the padded texts and the `extra` tokens to be generated, their branches left-padded and
    each text's own tokens right-padded after its branch; else the texts' own tokens left-padded."""
    hf, keep = model.hf, list(beginning.states)
    shared = beginning.mask.shape[1]
    rest = [e[shared:] for e in encoded]
    # a branch is left-padded inside the sequence, which at most doubles its length
    found = branches(rest) if window_covers(hf, 2 * max(len(e) for e in encoded) + extra) else []
    branch_of = {i: b for b in found for i in b.members}
    past = beginning
    if found:
        past = past.branched(model, [branch_of.get(i) for i in range(len(rest))], rest)
        rest = [r[branch_of[i].length:] if i in branch_of else r for i, r in enumerate(rest)]
    else:
        past = past.repeated(len(rest))
    ids, own = pad(rest, model.tokenizer.pad_token_id, left=not found)
    mask = torch.cat([past.mask.cpu(), own], dim=1)
    positions = past.mask.sum(1, keepdim=True).cpu() + (own.cumsum(-1) - 1).clamp(min=0)
    last = (own * torch.arange(own.shape[1])).argmax(1)  # each row's last real token, whichever side it is padded
    blocks = architectures.blocks(hf)
    with reading(blocks, layers, lambda h: at_rows(h, last)) as read, reading(blocks, keep, every_position) as seen:
        out = architectures.decoder(hf)(input_ids=ids.to(model.device), attention_mask=mask.to(model.device),
                                        position_ids=positions.to(model.device), past_key_values=past.cache,
                                        use_cache=True)
    logits = architectures.unembedding(hf)(at_rows(out.last_hidden_state, last)).float()
    before = past.mask.bool().cpu()  # where each row's beginning and branch hold its tokens (a branch is left-padded)
    states = {block: [torch.cat([past.states[block][row].cpu()[before[row]], seen[block][row].cpu()[own[row].bool()]])
                      for row in range(len(encoded))] for block in keep}
    return _Prefill(logits, out.past_key_values, mask, [read[layer] for layer in layers], states)


class _Draws:
    """The batch's draws, step by step: every call with a live answer row draws once over all its rows from its own
    generator, as `generate` draws over a batch with finished rows (an ended row's numbers are drawn and unused). On
    a CPU the calls' uniform integers are drawn on as many threads as torch's (each call's stream is its own, so the
    tokens are the same) and the race is run on them at once (`race.cpu_winners`); on another device each call draws
    `race.draw_one`, an ended row from a dummy distribution whose draw is discarded."""

    def __init__(self, calls: Sequence[SampleCall], call_of: torch.Tensor, device: torch.device | str) -> None:
        self.call_of = call_of
        self.first = torch.tensor([0] + [call.rows for call in calls]).cumsum(0)  # each call's first answer row
        self.generators = [torch.Generator(device=device).manual_seed(call.seed) for call in calls]
        self.temperature = torch.tensor([call.temperature for call in calls], device=device)
        self.cold = bool((self.temperature == 1).all())  # a temperature of 1 divides nothing
        self.on_cpu = torch.device(device).type == "cpu"
        self.threads = torch.get_num_threads() if self.on_cpu else 1
        self.integers: torch.Tensor | None = None  # the CPU draws' buffer, kept from step to step

    def __call__(self, logits: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        """A token for each of the answer rows `rows` (ascending), whose next-token logits `logits` holds in order.
        The full-vocabulary passes are the softmax and the draw."""
        calls = self.call_of[rows]
        scaled = logits if self.cold else logits / self.temperature[calls.to(logits.device)][:, None]
        probs = torch.softmax(scaled, dim=-1)
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
