"""The one batched primitive every chapter uses: for a batch of prompts, in one forward pass, the next-token
probabilities of chosen label tokens and the last-token residual stream of chosen blocks, optionally under a
steering intervention. Interventions run through nnsight, so the same code traces a local or an NDIF model."""

from __future__ import annotations

import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import nullcontext

import nnsight
import torch
from tqdm import tqdm

from llmaudit.errors import AuditError
from llmaudit.ledger import Ledger, call_label
from llmaudit.models import architectures
from llmaudit.models.attention import use_grouped
from llmaudit.models.batching import ForwardOutput, activations_only, memory_guard, pad, readout, token_batches
from llmaudit.models.handle import Handle
from llmaudit.models.intervention import Intervention, edit_key
from llmaudit.models.layers import hidden, with_hidden
from llmaudit.models.memory import BatchTokens, backing_off, batch_budget
from llmaudit.models.plain import hooked_forward
from llmaudit.models.plain_sampling import plain_samples
from llmaudit.models.prefix import forward_shared_prefix
from llmaudit.models.remote import failures_as_one_line
from llmaudit.models.request import Runtime, SampleRequest
from llmaudit.models.sampling import Samples, sample_calls
from llmaudit.models.tokens import single_token_ids


class AuditModel:
    """A causal LM with its tokenizer and chat template, wrapped for batched, steerable forward passes.

    Two engines run it. `lm`, the nnsight wrapper, runs the traced `forward` and `generate`, local and remote (NDIF)
    models alike, so that the code tested locally is the code traced remotely. `hf`, the transformers module itself
    (None for a remote model), runs what tracing cannot: the split steering sweep and its exact derivative
    (`models.sweep`, `models.derivative`), the shared-prefix key/value cache (`models.prefix`, which `forward` uses
    for a local model's unsteered prompts) and sampling (`sample`), each given this model's `handle`. Both are the
    same weights; the sweep and the prefix cache are tested equal to the traced forward. Chapters call them through
    `models.steer.run_pass`, one request per pass, under the `runtime` an audit binds once (`runner.chapter`).
    Inputs go to `device`, where the embedding computes (with `device_map`, accelerate moves them on from block to
    block)."""

    def __init__(
        self,
        name: str,
        lm,
        tokenizer,
        *,
        hf=None,
        remote: bool = False,
        system_prompt: str | None = None,
        provenance: dict | None = None,
        device: str = "cpu",
        chat_template: bool = True,
        template_options: Mapping[str, bool | int | str] | None = None,
    ):
        self.name = name
        self.hf = hf  # the local transformers module (None when remote), for the plain-PyTorch sweep engine
        self.device = device
        self.provenance = provenance or {}
        self.lm = lm
        self.tokenizer = tokenizer
        self.remote = remote
        self.system_prompt = system_prompt
        self.chat_template = chat_template
        self.template_options = dict(template_options or {})
        self.runtime = Runtime()  # the audit's cache, token budget and lambda batch (no cache until one is bound)
        config = lm.config
        architectures.layout(lm)  # a model whose parts cannot be found is refused here, not mid-chapter
        self.engine = architectures.engine(lm)
        self.n_layers: int = config.num_hidden_layers
        self.width: int = config.hidden_size
        if tokenizer.pad_token_id is None:
            tokenizer.pad_token = tokenizer.eos_token
        self.ledger = Ledger(self.n_layers, engine=None if remote else self.engine.reason)
        if hf is not None:
            if self.engine.fast:  # chunked masked attention is a fast engine; any other family keeps its own
                use_grouped(hf)
            else:
                print(f"llmaudit: {name}: {self.engine.reason} (slower, exact)", file=sys.stderr)
            # every block counts the token positions it runs on, whichever engine runs it
            for block in architectures.blocks(hf):
                block.register_forward_hook(lambda module, args, output: self.ledger.ran(_positions(output)))

    @property
    def handle(self) -> Handle:
        """What the local engines take of this model (`models.handle`); a remote model has none."""
        if self.hf is None:
            raise AuditError("this needs a local model: run this chapter with remote: false")
        return Handle(self.hf, self.tokenizer, self.device, self.ledger, self.n_layers, self.width)

    def encode(self, texts: Sequence[str]) -> list[list[int]]:
        """Token ids of chat-formatted texts, each tokenised on its own (the template holds the special tokens)."""
        return [self.tokenizer.encode(t, add_special_tokens=False) for t in texts]

    @property
    def identity(self) -> dict:
        """What determines this model's outputs (weights, dtype), as the key of every cached forward pass."""
        p = self.provenance
        weights = p.get("sha256") or (f"{p.get('source')}@{p['revision']}" if p.get("revision") else p.get("source"))
        return {"weights": weights, "dtype": "remote" if self.remote else str(self.lm.dtype), "device": self.device}

    def plain(self, text: str) -> str:
        """Text for the model to continue as it is, after the beginning-of-sequence token its tokenizer adds."""
        tokenizer = self.tokenizer
        adds_bos = tokenizer.bos_token is not None and tokenizer.encode("x")[:1] == [tokenizer.bos_token_id]
        return (tokenizer.bos_token if adds_bos else "") + text

    def chat(self, prompt: str, prefix: str = "") -> str:
        """The prompt as one user turn in the model's chat template, with the assistant's answer begun by `prefix`;
        for a model without a chat template (a base model), the prompt as plain text with `prefix` on a new line."""
        if not self.chat_template:
            system = f"{self.system_prompt}\n\n" if self.system_prompt else ""
            return self.plain(f"{system}{prompt}\n{prefix}")
        messages = [{"role": "user", "content": prompt}]
        if self.system_prompt is not None:
            messages.insert(0, {"role": "system", "content": self.system_prompt})
        text = self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True,
                                                  **self.template_options)
        return text + prefix

    def single_token_ids(self, words: Sequence[str]) -> list[int]:
        """Ids of the one-token forms of `words` for this model's tokenizer (`models.tokens.single_token_ids`)."""
        return single_token_ids(self.tokenizer, words)

    def forward(
        self,
        texts: Sequence[str],
        labels: Sequence[int] | None = None,
        layers: Sequence[int] = (),
        intervention: Intervention | None = None,
        batch_tokens: BatchTokens = 4096,
        desc: str | None = None,
        traced: bool = False,
        keep: Sequence[int] = (),
    ) -> ForwardOutput:
        """Label probabilities and activations of `texts` (already chat-formatted) in input order. A local model's
        unsteered prompts go through the shared-prefix engine (their common beginning runs once), which also keeps
        the outputs of blocks `keep` at every token (`ForwardOutput.states`), where the fast engines are verified for
        its family, else through the plain hooked forward (`models.plain`); steered or remote ones, and
        all with `traced`, through nnsight's trace in length-sorted, left-padded batches, each prompt whole, keeping
        no states. Only the last position's logits are computed."""
        if self.hf is not None and intervention is None and not traced:
            if not self.engine.fast:
                return hooked_forward(self.handle, texts, labels, layers, None, batch_tokens, desc, keep)
            return forward_shared_prefix(self.handle, texts, labels, layers, batch_tokens, desc, keep=keep)
        probs: list[torch.Tensor | None] = [None] * len(texts)
        acts: list[torch.Tensor | None] = [None] * len(texts)
        encoded = self.encode(texts)
        depth = max(layers) + 1 if activations_only(labels, layers) else None
        steered = None if intervention is None else (intervention.layer, [edit_key(intervention)])

        def run(batch: tuple[list[int], tuple[torch.Tensor, torch.Tensor, torch.Tensor]], budget: int) -> None:
            p, a = self._forward_batch(*batch[1], labels, layers, intervention)
            if self.remote:
                self._ran_remotely(batch[1][0])
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
        """Length-sorted batches of encoded texts (`encode`; `only` these of them), each as (input indices, (ids, mask,
        position ids)), left-padded on the model's device; position ids follow the attention mask so padding changes
        nothing."""
        order = sorted(range(len(encoded)) if only is None else only, key=lambda i: -len(encoded[i]))
        with tqdm(total=len(order), desc=desc, disable=desc is None, leave=False) as bar:
            for batch in token_batches(order, [len(e) for e in encoded], batch_tokens):
                ids, mask = pad([encoded[i] for i in batch], self.tokenizer.pad_token_id)
                positions = (mask.cumsum(-1) - 1).clamp(min=0)
                yield batch, (ids.to(self.device), mask.to(self.device), positions.to(self.device))
                bar.update(len(batch))

    def _forward_batch(
        self,
        input_ids: torch.Tensor,
        mask: torch.Tensor,
        positions: torch.Tensor,
        labels: Sequence[int] | None,
        layers: Sequence[int],
        intervention: Intervention | None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """One traced forward pass of a padded batch; returns label probabilities and saved activations."""
        blocks = architectures.blocks(self.lm)
        touched = sorted(set(layers) | ({intervention.layer} if intervention else set()))
        saved: dict[int, torch.Tensor] = {}
        failures = failures_as_one_line(self.provenance.get("source", self.name)) if self.remote else nullcontext()
        with torch.inference_mode(), failures:
            with self.lm.trace(
                input_ids=input_ids,
                attention_mask=mask,
                position_ids=positions,
                logits_to_keep=1,
                remote=self.remote,
            ):
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

    def sample(self, request: SampleRequest) -> Samples:
        """One batch of a sampling request, uncached (`models.sampled.run_sampling` plans the batches and caches
        them): seeded answers of each call's chat-formatted texts, drawn as `generate` draws them with the request's
        temperature, top-k and top-p (`models.sampling`, the same tokens as one `generate` call per prompt): per call,
        (rows, max_new_tokens) token ids with -1 from the end-of-sequence token on; given labels or layers, each
        text's label probabilities and last-token block outputs from the same pass, as `forward` gives them; and the
        outputs of the blocks kept at every prompt token, for a sweep of the same texts to start from."""
        if self.hf is None:
            raise AuditError("sampling answers needs a local model: run this chapter with remote: false")
        if not self.engine.fast:  # one generate call per prompt
            return plain_samples(self.handle, request)
        return sample_calls(self.handle, request, batch_tokens=self.runtime.batch_tokens)

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
                probs, _ = self._forward_batch(sequence, torch.ones_like(sequence), positions, None, (),
                                                   intervention)
                if self.remote:
                    self._ran_remotely(sequence)
                token = int(probs[0].argmax())
                if token == self.tokenizer.eos_token_id:
                    break
                new.append(token)
            steered = None if intervention is None else (intervention.layer, [edit_key(intervention)])
            self.ledger.need([ids + new], steered=steered)
        return self.tokenizer.decode(new, skip_special_tokens=True)

    def _ran_remotely(self, input_ids: torch.Tensor) -> None:
        """Count a pass NDIF ran, where no hook of the ledger runs: every block over every position sent, padding
        included, as the hooks count a local traced pass."""
        self.ledger.ran(input_ids.numel() * self.n_layers)


def _positions(output: object) -> int:
    """Token positions a block ran on: batch x tokens of its hidden-state output."""
    h = hidden(output)
    return h.shape[0] * h.shape[1]
