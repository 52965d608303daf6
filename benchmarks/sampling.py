"""Sampled framing answers, the framing chapter's way (models.sampling.batched: each prompt's text once, the answers of
many prompts decoded together) against transformers' `generate` once per prompt, the seed code's path, with the
same seeds, on the default model: the first N framing cells at the default sizes (10 answers of 16 tokens per
cell). Checks that the two draw the same tokens and prints the speed ratio measured in this run.
Usage: python benchmarks/sampling.py [N_CELLS]   (default 44)"""

from __future__ import annotations

import sys
import time

import torch

from llmaudit.chapters.framing.evaluate import texts, versions
from llmaudit.chapters.framing.stimuli import ATTRIBUTES, prompts
from llmaudit.config import load_params
from llmaudit.models import AuditModel, load_model
from llmaudit.models.passes.batching import pad
from llmaudit.models.request import SampleCall, SampleRequest
from llmaudit.models.sampling.sample_batches import call_batches


def generate(model: AuditModel, call: SampleCall, new: int) -> torch.Tensor:
    """One `generate` call for one prompt (left-padded texts, num_return_sequences = per_text), as the seed code."""
    ids, mask = pad(model.encode(call.texts), model.tokenizer.pad_token_id)
    torch.manual_seed(call.seed)
    with torch.inference_mode():
        out = model.hf.generate(input_ids=ids, attention_mask=mask, do_sample=True, temperature=1.0, top_k=0,
                                top_p=1.0, max_new_tokens=new, num_return_sequences=call.per_text,
                                pad_token_id=model.tokenizer.pad_token_id)
    tokens = torch.full((len(out), new), -1, dtype=torch.long)
    fresh = out[:, ids.shape[1]:]
    tokens[:, : fresh.shape[1]] = fresh.masked_fill((fresh == model.tokenizer.eos_token_id).cumsum(-1) > 0, -1)
    return tokens


def main(n: int) -> None:
    params = load_params("smollm2-135m-instruct")
    sizes = params.framing
    model = load_model(params.name, params.model)
    cells = [p for a in ATTRIBUTES for p in prompts(a.text)][:n]
    calls = [SampleCall(texts=texts(model, versions([p], range(sizes.samples)) if p.kind == "choice" else [p],
                              "chat"), per_text=1 if p.kind == "choice" else sizes.samples, seed=params.seed + i)
             for i, p in enumerate(cells)]
    answers = sum(call.rows for call in calls)
    started = time.perf_counter()
    reference = [generate(model, call, sizes.max_new_tokens) for call in calls]
    per_prompt = time.perf_counter() - started
    started = time.perf_counter()
    batched: list[torch.Tensor] = [torch.empty(0)] * len(calls)
    for batch in call_batches(model.handle, calls, sizes.max_new_tokens, params.batch_tokens):
        request = SampleRequest(calls=[calls[i] for i in batch], max_new_tokens=sizes.max_new_tokens)
        for i, tokens in zip(batch, model.sample(request).tokens):
            batched[i] = tokens
    together = time.perf_counter() - started
    same = sum(torch.equal(a, b) for a, b in zip(batched, reference))
    print(f"{len(calls)} framing cells, {answers} answers of up to {sizes.max_new_tokens} tokens, "
          f"torch threads {torch.get_num_threads()}")
    print(f"  generate per prompt {per_prompt:7.1f} s")
    print(f"  batched sampler     {together:7.1f} s   {per_prompt / together:.2f}x")
    print(f"  cells whose answers are identical token for token: {same} of {len(calls)}")
    assert same == len(calls)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 44)
