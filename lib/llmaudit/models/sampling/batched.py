"""Seeded sampling of many prompts in one batch, each prompt's answers drawn exactly as one `generate` call draws them
for that prompt alone (after `torch.manual_seed(seed)`, with the request's temperature, top-k and top-p:
`models.sampling.draws`).

A `generate` call with `num_return_sequences = n` runs its prompt n times and decodes one small batch per prompt. Here
every text is computed once, each beginning texts share once (`models.passes.prefix`: the beginning of all the batch's
texts, continuing the one an earlier batch ran where they agree, `models.sampling.prefix_cache`; the branches some
share, e.g. one question with its options in other orders), in chunks of the token budget; the
chunks' key/value caches join into one with room reserved for the tokens to come (`models.sampling.reserved`), each
text's rows are copied to its answers, and the answers of many prompts decode together, as many as the memory a pass of
the budget plans for holds in cache and draws (on a CPU at least `memory.HOST_DECODE_BYTES`:
`sample_batches.call_batches`). Answers that have ended leave the batch once a tenth of it has. Each prompt keeps its
own random stream: a generator of the model's device seeded as `generate` would seed it, asked at every step, until all
the prompt's answers have ended, for one draw over its rows in the (rows, vocabulary) shape `generate` asks for (an
ended answer takes part with a dummy row whose token is discarded). So the draws use the same random numbers and give
the same tokens, up to float rounding of the probabilities (tests/test_sampling.py compares the two). The prefill's last
position is also the next-token distribution a scoring pass over the same texts reads: it gives the texts' label
probabilities and block outputs too, so a chapter that scores and samples the same prompts runs them once."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import torch

from llmaudit.errors import AuditError
from llmaudit.models.loading import architectures
from llmaudit.models.memory import BatchTokens, Shape, batch_budget, is_out_of_memory, release_cached
from llmaudit.models.passes.batching import pad, readout, token_batches
from llmaudit.models.passes.handle import Handle
from llmaudit.models.passes.layers import at_rows, every_position, reading
from llmaudit.models.passes.packing import window_covers
from llmaudit.models.passes.prefix import Past, branches, shareable
from llmaudit.models.passes.required import required
from llmaudit.models.request import SampleRequest
from llmaudit.models.sampling.continuations import Kept, past_of
from llmaudit.models.sampling.draws import Draws
from llmaudit.models.sampling.prefix_cache import PrefixCache
from llmaudit.models.sampling.reserved import joined
from llmaudit.models.sampling.sample_batches import full_attention

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


def sample_calls(model: Handle, request: SampleRequest, *, batch_tokens: BatchTokens,
                 prefixes: PrefixCache | None = None) -> Samples:
    """The request's sampled answers (each text's answers together) and, given labels or layers, each text's label
    probabilities (over the whole vocabulary when labels is None, as `forward` gives them) and block outputs read
    from the same prefill, which also keeps the outputs of the blocks kept (`Keep.blocks`) at every prompt token. All
    calls decode as one batch (`sample_batches.call_batches` splits a long list), prefilled in chunks of
    `batch_tokens`; a batch that runs out of memory runs again as two halves, which draw the same answers (each call
    keeps its own random stream). The texts' common beginning continues the one `prefixes` keeps where they begin
    alike (the engine's, across batches: `models.sampling.prefix_cache`; None: run here)."""
    calls, prefixes = request.calls, prefixes or PrefixCache()
    try:
        budget = batch_budget(model.hf, model.device, batch_tokens)
        return _sample_together(model, request, budget, prefixes)
    except RuntimeError as err:
        if not is_out_of_memory(err):
            raise
        if len(calls) == 1:
            raise AuditError(f"out of memory sampling {calls[0].rows} answers of one prompt: lower the answers or "
                             "their length in the params file") from None
    release_cached()
    warnings.warn(f"out of memory sampling {len(calls)} prompts together: going on in two halves", stacklevel=2)
    half = len(calls) // 2
    first, second = (sample_calls(model, replace(request, calls=part), batch_tokens=batch_tokens, prefixes=prefixes)
                     for part in (calls[:half], calls[half:]))
    return first.followed_by(second)


def _sample_together(model: Handle, request: SampleRequest, budget: int, prefixes: PrefixCache) -> Samples:
    """`sample_calls` in one batch. The draws run on the model's device, each call's from a generator of that device
    seeded as `generate` seeds it there. An answer that ends stays in the batch, its token discarded, until a tenth
    of the batch has ended: then the ended rows leave it (a copy of the live rows' key/value cache). A `followed`
    request's answer rows are kept for the texts that continue them (`PrefixCache.answers`, at most one decoding
    batch's memory, `memory.Shape.decode_bytes`), as they leave and at the end."""
    hf, eos, device = model.hf, model.tokenizer.eos_token_id, model.device
    calls, max_new_tokens, labels, layers = request.calls, request.max_new_tokens, request.labels, request.layers
    encoded = model.encode(request.texts)
    text_of = torch.tensor([t for t, n in enumerate(n for call in calls for n in [call.per_text] * len(call.texts))
                            for _ in range(n)])  # answer row -> its text
    call_of = torch.tensor([c for c, call in enumerate(calls) for _ in range(call.rows)])  # answer row -> its call
    draw = Draws(request, call_of, device)
    tokens = torch.full((len(call_of), max_new_tokens), -1, dtype=torch.long)
    follow = request.followed and full_attention(hf)
    limit = Shape.of(hf).decode_bytes(budget, device)

    def keep_answers(rows: list[int], ran: int) -> None:  # rows of the batch, after `ran` decoding passes
        ids = []
        for row in rows:
            answer = tokens[held[row]].tolist()
            drawn = answer[: answer.index(eos)] if eos in answer else [x for x in answer if x >= 0]
            ids.append(encoded[int(text_of[held[row]])] + drawn[:ran])  # the tokens its cache holds
        prefixes.answers.keep(model, ids, cache, mask, rows, limit)

    with torch.inference_mode(), model.ledger.labelled("sample"):
        keep = () if request.keep is None else request.keep.blocks
        prefilled, row_of = _prefilled(model, encoded, max_new_tokens, layers, keep, budget, prefixes)
        cache, states = prefilled.cache, prefilled.states
        asked = labels is not None or layers
        probs, acts = readout(prefilled.logits, labels, prefilled.read) if asked else (None, None)
        cache.batch_select_indices(row_of[text_of].to(device))  # each text's row once per answer
        logits, mask = prefilled.logits[text_of.to(device)], prefilled.mask[row_of[text_of]]
        held = torch.arange(len(call_of))  # the answer rows in the batch, in order
        going = torch.ones(len(held), dtype=torch.bool)  # which of them are still being answered
        step = 0
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
                if follow:
                    keep_answers((~going).nonzero().squeeze(-1).tolist(), step)
                kept = going.nonzero().squeeze(-1)
                held, going, mask, ids = held[kept], going[kept], mask[kept], ids[kept]
                cache.batch_select_indices(kept.to(device))
            mask = torch.cat([mask, torch.ones(len(held), 1, dtype=mask.dtype)], dim=1)
            logits = hf(input_ids=ids[:, None].to(device), attention_mask=mask.to(device),
                        position_ids=(mask.sum(-1, keepdim=True) - 1).to(device), past_key_values=cache,
                        use_cache=True, logits_to_keep=1).logits[:, -1].float()
        if follow:
            keep_answers(list(range(len(held))), step)
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
               budget: int, prefixes: PrefixCache) -> tuple[_Prefill, torch.Tensor]:
    """`_prefill` of the texts in chunks of the budget (`_chunks`) after the beginning they all share, run once
    (after the part of it `prefixes` keeps), those that begin with a longer answer `prefixes` keeps after it
    (`models.sampling.continuations`, in chunks of their own), their caches joined with room for `extra` positions
    (`models.sampling.reserved.joined`) and their masks left-padded to match: the logits, block outputs and states in
    the texts' order, the cache and mask in the chunks' order; and the row of each text in those."""
    found: list[Kept | None] = [None] * len(encoded)
    if not keep and full_attention(model.hf):  # a kept answer where it holds more than the texts' common beginning
        shared = shareable(model.hf, encoded, extra)
        found = [kept if kept is not None and len(kept.tokens) > shared else None
                 for kept in prefixes.answers.take(model, encoded)]
    fresh = [t for t, kept in enumerate(found) if kept is None]
    chunks, parts = [], []
    if fresh:
        texts = [encoded[t] for t in fresh]
        shared = shareable(model.hf, texts, extra)
        beginning = prefixes.beginning(model, texts[0][:shared], keep)
        for chunk in _chunks(model.hf, texts, shared, budget):
            chunks.append([fresh[k] for k in chunk])
            parts.append(_prefill(model, [texts[k][shared:] for k in chunk], extra, layers, beginning))
    continued = {t: kept for t, kept in enumerate(found) if kept is not None}
    rest = {t: encoded[t][len(kept.tokens):] for t, kept in continued.items()}
    order = sorted(continued, key=lambda t: -len(rest[t]))
    lengths = [len(rest.get(t, ())) for t in range(len(encoded))]
    for chunk in token_batches(order, lengths, budget) if continued else ():
        chunks.append(chunk)
        parts.append(_prefill(model, [rest[t] for t in chunk], extra, layers, past_of(model, [continued[t]
                                                                                            for t in chunk])))
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


def _prefill(model: Handle, rest: list[list[int]], extra: int, layers: Sequence[int], past: Past) -> _Prefill:
    """Every text's tokens `rest` once, after `past`: either one beginning all the batch's texts share (already run,
    keeping the outputs of the blocks kept), each shared beginning after it once (`models.passes.prefix`: where some
    texts share more and the model's window covers the padded texts and the `extra` tokens to be generated, their
    branches left-padded and each text's own tokens right-padded after its branch), or a row of its own per text (a
    kept answer it continues, `models.sampling.continuations`); else the texts' own tokens left-padded."""
    hf, keep = model.hf, list(past.states)
    one = len(past.mask) == 1  # one beginning for all the texts
    # a branch is left-padded inside the sequence, which at most doubles its length
    covered = window_covers(hf, 2 * (past.mask.shape[1] + max(len(r) for r in rest)) + extra)
    found = branches(rest) if one and covered else []
    branch_of = {i: b for b in found for i in b.members}
    alone = [len(r) - (branch_of[i].length if i in branch_of else 0) for i, r in enumerate(rest)]
    if found and len(found) * max(b.length for b in found) + len(rest) * max(alone) >= len(rest) * max(map(len, rest)):
        found, branch_of = [], {}  # the branches would pad more than they share
    if found:
        past = past.branched(model, [branch_of.get(i) for i in range(len(rest))], rest)
        rest = [r[branch_of[i].length:] if i in branch_of else r for i, r in enumerate(rest)]
    elif one:
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
                      for row in range(len(rest))] for block in keep}
    return _Prefill(logits, out.past_key_values, mask, [read[layer] for layer in layers], states)


