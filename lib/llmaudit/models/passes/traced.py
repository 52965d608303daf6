"""The traced forward: nnsight's trace of the model's own forward, local or remote (NDIF), so that the code tested
locally is the code traced remotely. Prompts run whole, in length-sorted, left-padded batches (position ids follow
the attention mask, so padding changes nothing); a steering edit is made on the traced block output at every
position (main paper §3.3); only the last position's logits are computed. It is the reference the local engines are
tested against and the engine of a remote model (`models.engines.traced`)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any

import nnsight
import torch
from tqdm import tqdm

from llmaudit.ledger import Ledger, call_label
from llmaudit.models.intervention import Intervention, edit_key
from llmaudit.models.loading import architectures
from llmaudit.models.loading.remote import failures_as_one_line
from llmaudit.models.loading.tokens import encode
from llmaudit.models.memory import BatchTokens, backing_off, batch_budget
from llmaudit.models.passes.batching import ForwardOutput, activations_only, memory_guard, pad, readout, token_batches
from llmaudit.models.passes.layers import hidden, with_hidden


@dataclass(frozen=True)
class Tracer:
    """What a traced pass needs of a model: its nnsight wrapper `lm`, the transformers module `hf` (None when remote:
    it sizes the batches), tokenizer, input device, ledger, block count, whether NDIF runs it and its source's
    name for NDIF's failure lines."""

    lm: Any
    hf: Any
    tokenizer: Any
    device: str
    ledger: Ledger
    n_layers: int
    remote: bool
    source: str

    def encode(self, texts: Sequence[str]) -> list[list[int]]:
        """Token ids of chat-formatted texts, each tokenised on its own (`loading.tokens.encode`)."""
        return encode(self.tokenizer, texts)

    def forward(self, texts: Sequence[str], labels: Sequence[int] | None = None, layers: Sequence[int] = (),
                intervention: Intervention | None = None, batch_tokens: BatchTokens = 4096,
                desc: str | None = None) -> ForwardOutput:
        """Label probabilities and last-token block outputs of `texts` (chat-formatted) in input order, under
        `intervention` (None: unsteered); no states are kept."""
        probs: list[torch.Tensor | None] = [None] * len(texts)
        acts: list[torch.Tensor | None] = [None] * len(texts)
        encoded = self.encode(texts)
        depth = max(layers) + 1 if activations_only(labels, layers) else None
        steered = None if intervention is None else (intervention.layer, [edit_key(intervention)])

        def run(batch: tuple[list[int], tuple[torch.Tensor, torch.Tensor, torch.Tensor]], budget: int) -> None:
            p, a = self.batch(*batch[1], labels, layers, intervention)
            if self.remote:
                self.ran_remotely(batch[1][0])
            for row, i in enumerate(batch[0]):
                probs[i] = p[row]
                acts[i] = a[row] if a is not None else None

        def plan(left: list[int], budget: int) -> Iterator[tuple[list[int], tuple]]:
            for batch in self.padded_batches(encoded, budget, desc, left):
                yield batch[0], batch

        budget = batch_budget(self.hf, self.device, batch_tokens)
        engine = "remote" if self.remote else "traced"  # the ledger records which passes ran on NDIF
        with memory_guard(batch_tokens), self.ledger.account(encoded, depth, steered, call_label(engine, desc)):
            backing_off(len(encoded), budget, plan, run)
        return ForwardOutput(
            probs=torch.stack(probs),  # type: ignore[arg-type]
            acts=torch.stack(acts) if layers else None,  # type: ignore[arg-type]
        )

    def padded_batches(
        self, encoded: Sequence[Sequence[int]], batch_tokens: int, desc: str | None = None,
        only: Sequence[int] | None = None,
    ) -> Iterator[tuple[list[int], tuple[torch.Tensor, torch.Tensor, torch.Tensor]]]:
        """Length-sorted batches of encoded texts (`only` these of them), each as (input indices, (ids, mask, position
        ids)), left-padded on the model's device; position ids follow the attention mask so padding changes
        nothing."""
        order = sorted(range(len(encoded)) if only is None else only, key=lambda i: -len(encoded[i]))
        with tqdm(total=len(order), desc=desc, disable=desc is None, leave=False) as bar:
            for batch in token_batches(order, [len(e) for e in encoded], batch_tokens):
                ids, mask = pad([encoded[i] for i in batch], self.tokenizer.pad_token_id)
                positions = (mask.cumsum(-1) - 1).clamp(min=0)
                yield batch, (ids.to(self.device), mask.to(self.device), positions.to(self.device))
                bar.update(len(batch))

    def batch(self, input_ids: torch.Tensor, mask: torch.Tensor, positions: torch.Tensor,
              labels: Sequence[int] | None, layers: Sequence[int],
              intervention: Intervention | None) -> tuple[torch.Tensor, torch.Tensor | None]:
        """One traced forward pass of a padded batch: its label probabilities and saved block outputs."""
        blocks = architectures.blocks(self.lm)
        touched = sorted(set(layers) | ({intervention.layer} if intervention else set()))
        saved: dict[int, torch.Tensor] = {}
        failures = failures_as_one_line(self.source) if self.remote else nullcontext()
        with torch.inference_mode(), failures:
            with self.lm.trace(input_ids=input_ids, attention_mask=mask, position_ids=positions, logits_to_keep=1,
                               remote=self.remote):
                for layer in touched:
                    output = blocks[layer].output
                    h = hidden(output)
                    if intervention is not None and layer == intervention.layer:
                        h = intervention(h)
                        blocks[layer].output = with_hidden(output, h)
                    if layer in layers:
                        saved[layer] = h[:, -1, :].save()  # type: ignore[attr-defined]  # nnsight's proxy
                # a remote trace hands back the saved values it binds by name, not those inside a container
                nnsight.save(saved)
                # the model's own logits: some heads scale or soft-cap the unembedding's output (Gemma 2, Cohere)
                logits = self.lm.output.logits[:, -1, :].save()
            return readout(logits, labels, [saved[layer] for layer in layers])

    def generate(self, text: str, max_new_tokens: int, intervention: Intervention | None = None) -> str:
        """Greedy continuation of a chat-formatted `text`; the edit applies at every prompt and generated position
        because each step reruns the whole sequence (cheap for a short demo, and exactly the main paper's
        intervention, §3.3)."""
        ids = self.encode([text])[0]
        new: list[int] = []
        with self.ledger.labelled(call_label("remote", "generate") if self.remote else "generate"):
            for _ in range(max_new_tokens):
                sequence = torch.tensor([ids + new], device=self.device)
                positions = torch.arange(sequence.shape[1], device=self.device).unsqueeze(0)
                probs, _ = self.batch(sequence, torch.ones_like(sequence), positions, None, (), intervention)
                if self.remote:
                    self.ran_remotely(sequence)
                token = int(probs[0].argmax())
                if token == self.tokenizer.eos_token_id:
                    break
                new.append(token)
            steered = None if intervention is None else (intervention.layer, [edit_key(intervention)])
            self.ledger.need([ids + new], steered=steered)
        return self.tokenizer.decode(new, skip_special_tokens=True)

    def ran_remotely(self, input_ids: torch.Tensor) -> None:
        """Count a pass NDIF ran, where no hook of the ledger runs: every block over every position sent, padding
        included, as the hooks count a local traced pass."""
        self.ledger.ran(input_ids.numel() * self.n_layers)
