"""Token-tree packing: each distinct beginning once per row, every token seeing exactly its own prompt's earlier
tokens at its own position; and the sweep on packed rows running no more than the ledger's minimum."""

from __future__ import annotations

import torch

from llmaudit.ledger import Ledger
from llmaudit.models.ask import ask
from llmaudit.models.passes.packing import PackedBatch, Row, pack
from llmaudit.models.request import Edit, Request
from test_sweep_architectures import labels_of, random_vector

# Two levels of sharing, as in BBQ: a context shared by four prompts, a further sentence by two of them.
NESTED = [
    [5, 6, 7, 8, 9, 1, 2],
    [5, 6, 7, 8, 9, 1, 3],
    [5, 6, 7, 8, 9, 10, 11, 12, 1, 2],
    [5, 6, 7, 8, 9, 10, 11, 12, 1, 3],
]
OTHER = [[20, 21, 22], [5, 6, 30]]  # shares nothing; shares only 2 beginning tokens with the nested ones


def groups(rows: list[Row]) -> list[list[int]]:
    """The prompts of each row, sorted."""
    return sorted(sorted(row.members) for row in rows)


def test_a_row_holds_each_distinct_beginning_once_and_rebuilds_every_prompt() -> None:
    row = Row.of(range(len(NESTED)), NESTED)
    assert len(row.tokens) == len({tuple(p[:n]) for p in NESTED for n in range(1, len(p) + 1)})
    depths = row.depths()
    for prompt, path in zip(NESTED, row.paths):
        assert [row.tokens[k] for k in path] == prompt
        assert [depths[k] for k in path] == list(range(len(prompt)))


def test_every_token_attends_to_exactly_its_prompt_so_far() -> None:
    row = Row.of(range(len(NESTED)), NESTED)
    seen = row.ancestry()
    for path in row.paths:
        for n, k in enumerate(path):
            assert set(seen[k].nonzero()[0]) == set(path[: n + 1])


def test_prompts_share_a_row_while_it_costs_less_than_apart_within_the_budget() -> None:
    prompts = NESTED + OTHER
    assert groups(pack(prompts, tree=True)) == [[0, 1, 2, 3, 5], [4]]  # attention free: any shared token joins
    # n (1 + 0.2 n): the nested prompts save more than their longer row costs; 2 shared tokens of 3 do not
    assert groups(pack(prompts, tree=True, attention=0.2)) == [[0, 1, 2, 3], [4], [5]]
    assert all(len(row.members) == 1 for row in pack(prompts, tree=False))
    capped = pack(prompts, tree=True, row_tokens=12)  # the nested tree has 15 distinct tokens
    assert max(len(row.tokens) for row in capped) <= 12 and len(capped) > len(pack(prompts, tree=True))


def test_a_packed_batch_places_reads_and_unpacks_each_member() -> None:
    rows = pack(NESTED + OTHER, tree=True)
    batch = PackedBatch.of(rows, pad_id=0)
    states = [torch.tensor(p, dtype=torch.float).unsqueeze(-1) for p in (NESTED + OTHER)]
    placed = batch.place([states[i] for i in batch.members])
    assert [s.squeeze(-1).tolist() for s in batch.unpack(placed)] == [(NESTED + OTHER)[i] for i in batch.members]
    assert batch.pick(placed).squeeze(-1).tolist() == [(NESTED + OTHER)[i][-1] for i in batch.members]
    mask = batch.attention(before=3, device="cpu")
    assert mask.shape == (len(rows), 1, batch.ids.shape[1], 3 + batch.ids.shape[1]) and mask[..., :3].all()


def test_a_sweep_of_nested_variants_runs_each_distinct_token_once_per_block_and_lambda(bind, tiny_model) -> None:
    """Two rows of equal length (the beginning all four share runs once, before them), no padding: the ledger's count of
    what ran equals its minimum (each distinct prefix through the lower blocks once and the upper blocks once per
    lambda), and the answers are each prompt's own."""
    texts = [tiny_model.chat(p, "answer :") for p in (
        "the nurse started a new job and she said that it was good",
        "the nurse started a new job and she said that it was bad",
        "the nurse started a new job . he said that it was good",
        "the nurse started a new job . he said that it was bad",
    )]
    labels, vector, lambdas = labels_of(tiny_model), random_vector(tiny_model, 1), [-1.0, 1.0]
    tiny_model.ledger = Ledger(tiny_model.n_layers)
    swept = ask(bind(tiny_model, batch_tokens=4096, lambda_batch=2),
                Request(texts=texts, labels=labels, edit=Edit(vector=vector, lambdas=lambdas))).probs
    assert tiny_model.ledger.actual == tiny_model.ledger.minimum
    for lam, probs in zip(lambdas, swept):
        alone = torch.cat([tiny_model.forward([text], labels, intervention=vector.intervention(lam)).probs
                           for text in texts])
        torch.testing.assert_close(probs, alone, atol=1e-5, rtol=0)
