"""The audited model: a causal LM with its tokenizer and chat template, the engine chosen for it once as it loads
(`models.engines`) and the traced forward every engine is tested against (`models.passes.traced`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from llmaudit.errors import AuditError
from llmaudit.ledger import Ledger
from llmaudit.models.engines import Engine, choose
from llmaudit.models.intervention import Intervention
from llmaudit.models.loading import architectures
from llmaudit.models.loading.tokens import encode, single_token_ids
from llmaudit.models.memory import BatchTokens
from llmaudit.models.passes.batching import ForwardOutput
from llmaudit.models.passes.handle import Handle
from llmaudit.models.passes.layers import hidden
from llmaudit.models.passes.traced import Tracer
from llmaudit.models.request import Runtime, SampleRequest
from llmaudit.models.sampling.batched import Samples


class AuditModel:
    """A causal LM with its tokenizer and chat template, wrapped for batched, steerable forward passes.

    `lm` is the nnsight wrapper, `hf` the transformers module itself (None for a remote model). The engine that
    answers the model layer's requests (`engine`: fast, plain or traced, `models.engines.choose`) is chosen here,
    once; chapters reach it through `models.ask.ask`, one request per pass or sampling, under the `runtime` an audit
    binds once (`runner.chapter`). Inputs go to `device`, where the embedding computes (with `device_map`, accelerate
    moves them on from block to block)."""

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
        self.n_layers: int = config.num_hidden_layers
        self.width: int = config.hidden_size
        if tokenizer.pad_token_id is None:
            tokenizer.pad_token = tokenizer.eos_token
        self.ledger = Ledger(self.n_layers)
        self.engine: Engine = choose(name=name, parts=self, remote=remote)
        self.ledger.engine = None if remote else self.engine.reason
        if hf is not None:  # every block counts the token positions it runs on, whichever engine runs it
            for block in architectures.blocks(hf):
                block.register_forward_hook(lambda module, args, output: self.ledger.ran(_positions(output)))

    @property
    def handle(self) -> Handle:
        """What the local engines take of this model (`models.passes.handle`); a remote model has none."""
        if self.hf is None:
            raise AuditError("this needs a local model: run this chapter with remote: false")
        return Handle(self.hf, self.tokenizer, self.device, self.ledger, self.n_layers, self.width)

    @property
    def tracer(self) -> Tracer:
        """What the traced forward takes of this model (`models.passes.traced`), local or remote."""
        return Tracer(self.lm, self.hf, self.tokenizer, self.device, self.ledger, self.n_layers, self.remote,
                      self.provenance.get("source", self.name))

    def encode(self, texts: Sequence[str]) -> list[list[int]]:
        """Token ids of chat-formatted texts, each tokenised on its own (`loading.tokens.encode`)."""
        return encode(self.tokenizer, texts)

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
        """Ids of the one-token forms of `words` for this model's tokenizer
        (`models.loading.tokens.single_token_ids`)."""
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
        """Label probabilities and activations of `texts` (already chat-formatted) in input order. Unsteered prompts
        go through the model's engine (`engine.score`; the fast one also keeps the outputs of blocks `keep` at every
        token, `ForwardOutput.states`); steered ones, and all with `traced`, through nnsight's trace
        (`models.passes.traced`), the reference every engine is tested against."""
        if intervention is None and not traced:
            return self.engine.score(texts, labels, layers, batch_tokens=batch_tokens, desc=desc, keep=keep)
        return self.tracer.forward(texts, labels, layers, intervention, batch_tokens, desc)

    def sample(self, request: SampleRequest) -> Samples:
        """One batch of a sampling request, uncached (`models.sampled.cached_samples` plans the batches and caches
        them), by the model's engine: seeded answers of each call's chat-formatted texts, drawn as `generate` draws
        them with the request's temperature, top-k and top-p (the same tokens as one `generate` call per prompt): per
        call, (rows, max_new_tokens) token ids with -1 from the end-of-sequence token on; given labels or layers,
        each text's label probabilities and last-token block outputs from the same pass, as `forward` gives them;
        and the outputs of the blocks kept at every prompt token, for a sweep of the same texts to start from. An
        engine that cannot sample refuses with one line."""
        return self.engine.sample(request, batch_tokens=self.runtime.batch_tokens)

    def generate(self, text: str, max_new_tokens: int, intervention: Intervention | None = None) -> str:
        """Greedy continuation of a chat-formatted `text` under `intervention` at every position
        (`models.passes.traced`)."""
        return self.tracer.generate(text, max_new_tokens, intervention)


def _positions(output: object) -> int:
    """Token positions a block ran on: batch x tokens of its hidden-state output."""
    h = hidden(output)
    return h.shape[0] * h.shape[1]
