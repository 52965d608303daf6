"""The conformance suite: tiny random-weight models of many families, each built from its transformers config class
on the fly (no download). For every family, the plain hooked forward (`models.passes.plain`) equals the model's own
forward run one prompt at a time with the edit hooked in, probabilities, block outputs and the exact derivative (against
reverse-mode autograd); for every family in `architectures.FAST`, every fast engine (shared prefix and token trees,
split sweep, exact derivative, kept lower states, batched sampler, chunked masked attention) equals the plain hooked
forward, to 1e-5 in float32, at several lambdas and both edit forms. A family joins the fast table with one line
there and this suite."""

from __future__ import annotations

import pytest
import torch

from conftest import build_tokenizer
from llmaudit.chapters.steering_vectors import SteeringVector
from llmaudit.models import AuditModel
from llmaudit.models.ask import ask
from llmaudit.models.loading import architectures
from llmaudit.models.passes import attention
from llmaudit.models.passes.layers import hidden, with_hidden
from llmaudit.models.passes.plain import hooked_forward, hooked_sweep
from llmaudit.models.passes.prefix import forward_shared_prefix
from llmaudit.models.passes.sweep import split_sweep
from llmaudit.models.request import Edit, Keep, Request, SampleCall, SampleRequest
from llmaudit.models.sampling.plain_sampling import plain_samples
from test_sampling import generate

WINDOW = 4  # shorter than every prompt: a family's sliding-window blocks see less than the whole prompt
MIXED = ["sliding_attention", "full_attention", "sliding_attention", "full_attention"]
MOE = {"num_experts_per_tok": 2, "moe_intermediate_size": 16}
# model_type -> config fields beyond the shared tiny shape (sliding windows where the family has them, experts)
FAMILIES: dict[str, dict] = {
    "llama": {},
    "mistral": {"sliding_window": WINDOW},
    "ministral": {"sliding_window": WINDOW, "layer_types": MIXED},
    "qwen2": {"use_sliding_window": True, "sliding_window": WINDOW, "layer_types": MIXED},
    "qwen3": {},
    "qwen3_moe": {"num_experts": 4, **MOE},
    "gemma2": {"sliding_window": WINDOW, "query_pre_attn_scalar": 8, "attn_logit_softcapping": 5.0,
               "final_logit_softcapping": 3.0},
    "gemma3_text": {"sliding_window": WINDOW, "layer_types": MIXED, "query_pre_attn_scalar": 8},
    "phi3": {"partial_rotary_factor": 0.75},  # Phi-4-mini's
    "olmo2": {},
    "granite": {"embedding_multiplier": 2.0, "residual_multiplier": 0.5, "logits_scaling": 2.0},
    "smollm3": {},
    "gpt2": {},
    "cohere2": {"sliding_window": WINDOW, "layer_types": MIXED},
    "glm4": {},
    "mixtral": {"num_local_experts": 4, "num_experts_per_tok": 2},
    "olmoe": {"num_experts": 4, "num_experts_per_tok": 2},
}
FAST = sorted(architectures.FAST)
LAMBDAS = [-1.0, 0.5, 1.0]
LAYER = 1  # the steering block, of four
PROMPTS = [
    "she",
    "the nurse started a new job and she said that it was good",
    "the nurse started a new job and she said that it was bad",
    "the nurse started a new job . he said it was good",
    "write one sentence about a doctor who started a new job . the doctor said it was good and bad",
]


def build(model_type: str) -> AuditModel:
    """A seeded random 4-block model of `model_type` (width 32, 4 heads, 2 key/value heads) with the conftest
    tokenizer, its output layer widened so that label probabilities differ visibly."""
    from nnsight import TransformersModel
    from transformers import AutoConfig, AutoModelForCausalLM

    tokenizer = build_tokenizer()
    config = AutoConfig.for_model(
        model_type, vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=4,
        num_attention_heads=4, num_key_value_heads=2, head_dim=8, max_position_embeddings=256,
        tie_word_embeddings=False, bos_token_id=2, eos_token_id=1, pad_token_id=1, **FAMILIES[model_type],
    )
    torch.manual_seed(0)
    hf = AutoModelForCausalLM.from_config(config).eval()
    with torch.no_grad():
        hf.get_output_embeddings().weight.mul_(20.0)
    return AuditModel(model_type, TransformersModel(hf, task="text-generation", tokenizer=tokenizer), tokenizer, hf=hf)


@pytest.fixture(scope="module")
def models():
    """model_type -> (model, texts, labels, vector), built on first use."""
    built: dict[str, tuple] = {}

    def get(model_type: str) -> tuple:
        if model_type not in built:
            model = build(model_type)
            texts = [model.chat(p, "answer :") for p in PROMPTS]
            labels = model.single_token_ids(["she", "he", "yes"])
            generator = torch.Generator().manual_seed(7)
            direction = torch.nn.functional.normalize(torch.randn(model.width, generator=generator), dim=0)
            mean = torch.randn(model.width, generator=generator) * 0.1
            built[model_type] = model, texts, labels, SteeringVector("v", "gender", LAYER, direction, mean, k=2.5)
        return built[model_type]

    return get


def one_by_one(model: AuditModel, text: str, edit, layers: list[int]) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """The model's own last-position logits of one prompt, alone, with `edit` hooked on its block (None: none), and
    the last token's outputs of `layers`."""
    blocks = architectures.blocks(model.hf)
    read: dict[int, torch.Tensor] = {}
    hooks = [] if edit is None else [blocks[edit.layer].register_forward_hook(
        lambda module, args, output: with_hidden(output, edit(hidden(output))))]
    hooks += [blocks[b].register_forward_hook(lambda module, args, output, b=b: read.__setitem__(b, hidden(output)))
              for b in layers]
    try:
        ids = torch.tensor([model.tokenizer.encode(text, add_special_tokens=False)])
        logits = model.hf(input_ids=ids).logits[0, -1]
    finally:
        for hook in hooks:
            hook.remove()
    return logits, [read[b][0, -1] for b in layers]


@pytest.mark.parametrize("model_type", sorted(FAMILIES))
def test_parts_are_found_through_the_accessors(models, model_type) -> None:
    model = models(model_type)[0]
    hf, layout = model.hf, architectures.layout(model.hf)
    assert hf.config.model_type == model_type and architectures.layout(model.lm) == layout
    assert architectures.decoder(hf) is hf.get_decoder()
    assert len(architectures.blocks(hf)) == 4 and len(architectures.blocks(model.lm)) == 4
    assert architectures.find(hf, layout.embedding) is hf.get_input_embeddings()
    assert architectures.unembedding(hf) is hf.get_output_embeddings()
    assert "norm" in type(architectures.find(hf, layout.final_norm)).__name__.lower()


@pytest.mark.parametrize("model_type", sorted(FAMILIES))
def test_traced_forward_reads_the_blocks_and_logits_the_model_computes(models, model_type) -> None:
    """The traced forward (nnsight), which reaches the blocks through the layout found, and the model's own head
    (soft-capped or scaled logits included) give what the model's own forward gives."""
    model, texts, labels, _ = models(model_type)
    with torch.no_grad():
        logits, acts = one_by_one(model, texts[1], None, [0, LAYER])
    got = model.forward(texts[1:2], labels, layers=[0, LAYER], traced=True)
    torch.testing.assert_close(got.probs[0], torch.softmax(logits, -1)[labels], atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(got.acts[0], torch.stack(acts), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("projection", [True, False])
@pytest.mark.parametrize("model_type", sorted(FAMILIES))
def test_plain_engine_is_the_models_own_forward(models, model_type, projection) -> None:
    """Batched, right-padded, hooked: each prompt as the model computes it alone, steered at every position."""
    model, texts, labels, vector = models(model_type)
    layers, lambdas = [0, LAYER, 3], [None, -1.0, 1.0]
    swept = hooked_sweep(model.handle, texts, labels, vector, lambdas, None, projection, batch_tokens=60,
                         layers=layers)
    for k, lam in enumerate(lambdas):
        edit = None if lam is None else vector.intervention(lam, projection)
        with torch.no_grad():
            alone = [one_by_one(model, text, edit, layers) for text in texts]
        want = torch.stack([torch.softmax(logits.float(), -1)[labels] for logits, _ in alone])
        torch.testing.assert_close(swept.probs[k], want, atol=1e-5, rtol=0)
        torch.testing.assert_close(swept.acts[k], torch.stack([torch.stack(a) for _, a in alone]), atol=1e-5,
                                   rtol=1e-5)
    assert (swept.probs[1] - swept.probs[-1]).abs().max() > 1e-3  # steering moves the answers


@pytest.mark.parametrize("model_type", sorted(FAMILIES))
def test_plain_derivative_is_autograd_of_the_models_own_forward(models, model_type) -> None:
    model, texts, labels, vector = models(model_type)
    targets = [i % len(labels) for i in range(len(texts))]
    for projection in (True, False):
        exact = hooked_sweep(model.handle, texts, labels, vector, [], targets, projection, batch_tokens=60).derivative
        reference = []
        for text, target in zip(texts, targets):
            lam = torch.zeros((), requires_grad=True)
            probs = torch.softmax(one_by_one(model, text, vector.intervention(lam, projection), [])[0][labels], -1)
            reference.append(torch.autograd.grad(probs[target], lam)[0])
        torch.testing.assert_close(exact, torch.stack(reference), atol=1e-5, rtol=1e-4)
        assert exact.abs().max() > 1e-3


@pytest.mark.parametrize("projection", [True, False])
@pytest.mark.parametrize("model_type", FAST)
def test_fast_engines_equal_the_plain_engine(models, model_type, projection, monkeypatch) -> None:
    """The split sweep (shared beginning, token trees where the window allows, stacked lambdas, masked attention in
    chunks of a few queries) with its derivative and block outputs, and the shared-prefix forward with kept states,
    against the plain engine."""
    monkeypatch.setattr(attention, "SCORE_BYTES", 1 << 14)  # a few queries per chunk at these sizes
    model, texts, labels, vector = models(model_type)
    targets = [i % len(labels) for i in range(len(texts))]
    layers, lambdas = [0, LAYER, 3], [None, *LAMBDAS]
    plain = hooked_sweep(model.handle, texts, labels, vector, lambdas, targets, projection, batch_tokens=60,
                         layers=layers)
    fast = split_sweep(model.handle, texts, labels, vector, lambdas, targets, projection, batch_tokens=60,
                       lambda_batch=2, layers=layers)
    torch.testing.assert_close(fast.probs, plain.probs, atol=1e-5, rtol=0)
    torch.testing.assert_close(fast.acts, plain.acts, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(fast.derivative, plain.derivative, atol=1e-5, rtol=1e-4)
    prefix = forward_shared_prefix(model.handle, texts, labels, layers, batch_tokens=60, keep=[LAYER])
    unsteered = hooked_forward(model.handle, texts, labels, keep=[LAYER])
    torch.testing.assert_close(prefix.probs, plain.probs[0], atol=1e-5, rtol=0)
    torch.testing.assert_close(prefix.acts, plain.acts[0], atol=1e-5, rtol=1e-5)
    for kept, want in zip(prefix.states[LAYER], unsteered.states[LAYER]):
        torch.testing.assert_close(kept, want, atol=1e-5, rtol=1e-5)


def sample_calls(texts: list[str]) -> list[SampleCall]:
    """A prompt answered three times and one of two texts answered twice each."""
    return [SampleCall(texts=(texts[1],), per_text=3, seed=11),
            SampleCall(texts=(texts[2], texts[3]), per_text=2, seed=12)]


# generate's sampling parameters: temperature alone, top-k alone, top-p alone, both, and the defaults
SAMPLINGS = [{"temperature": 0.3}, {"temperature": 0.8, "top_k": 5}, {"top_p": 0.8},
             {"temperature": 0.8, "top_k": 10, "top_p": 0.9}, {}]


@pytest.mark.parametrize("model_type", sorted(FAMILIES))
def test_every_sampler_draws_what_generate_draws_with_the_requests_sampling(models, model_type) -> None:
    """The plain sampler, and for a fast family the batched one, draw `generate`'s tokens at each of `SAMPLINGS` (one
    call of two texts answered twice each); on it a temperature of 0.3 draws otherwise than 1, so a sampler that
    ignores the temperature fails."""
    model, texts, _, _ = models(model_type)
    drawn = {}
    for sampling in SAMPLINGS:
        request = SampleRequest(calls=sample_calls(texts)[1:], max_new_tokens=5, **sampling)
        want = [generate(model, call, request) for call in request.calls]
        samplers = {"plain": plain_samples(model.handle, request)} | (
            {"batched": model.sample(request)} if model_type in FAST else {})
        for name, got in samplers.items():
            assert all(torch.equal(a, b) for a, b in zip(got.tokens, want, strict=True)), (name, sampling)
        drawn[sampling.get("temperature", 1.0), "top_k" in sampling or "top_p" in sampling] = want
    assert not all(torch.equal(a, b) for a, b in zip(drawn[0.3, False], drawn[1.0, False]))


@pytest.mark.parametrize("model_type", [*FAST, "gemma2"])
def test_batched_sampler_draws_what_the_plain_sampler_draws(models, model_type) -> None:
    """The batched sampler (fast families) and one `generate` call per prompt: the same answers, label probabilities,
    block outputs and kept states; a family outside the fast table samples through the latter."""
    model, texts, labels, _ = models(model_type)
    request = SampleRequest(calls=sample_calls(texts), max_new_tokens=5, labels=labels, layers=[LAYER],
                            keep=Keep(blocks=[LAYER]))
    plain = plain_samples(model.handle, request)
    got = model.sample(request)
    assert [t.shape for t in got.tokens] == [(3, 5), (4, 5)]
    for a, b in zip(got.tokens, plain.tokens):
        assert torch.equal(a, b)
    torch.testing.assert_close(got.probs, plain.probs, atol=1e-5, rtol=0)
    torch.testing.assert_close(got.acts, plain.acts, atol=1e-5, rtol=1e-5)
    for kept, want in zip(got.states[LAYER], plain.states[LAYER]):
        torch.testing.assert_close(kept, want, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("model_type", FAST)
def test_a_sweep_from_kept_lower_states_equals_the_plain_engine(bind, models, model_type, tmp_path) -> None:
    """States kept by the unsteered pass (`models.request.Keep`) start the sweep, which finds them itself, with the
    plain engine's answers."""
    model, texts, labels, vector = models(model_type)
    targets = [0] * len(texts)
    plain = hooked_sweep(model.handle, texts, labels, vector, LAMBDAS, targets, batch_tokens=60)
    ask(bind(model, cache=tmp_path, batch_tokens=60), Request(texts=texts, labels=labels, keep=Keep(blocks=(0,))))
    started = ask(model, Request(texts=texts, labels=labels, edit=Edit(vector=vector, lambdas=LAMBDAS),
                                 targets=targets))
    torch.testing.assert_close(started.probs, plain.probs, atol=1e-5, rtol=0)
    torch.testing.assert_close(started.derivative, plain.derivative, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("model_type", sorted(set(FAMILIES) - set(FAST)))
def test_a_family_outside_the_fast_table_runs_every_pass_plain(models, model_type) -> None:
    """`ask` and the unsteered forward take the plain engine, and the ledger labels say so."""
    model, texts, labels, vector = models(model_type)
    assert model.engine.name == "plain" and f"'{model_type}'" in model.engine.reason
    out = ask(model, Request(texts=texts, labels=labels, edit=Edit(vector=vector, lambdas=LAMBDAS),
                             targets=[0] * len(texts), layers=[LAYER], desc="sweep"))
    assert out.probs.shape == (len(LAMBDAS), len(texts), len(labels)) and out.derivative is not None
    assert model.forward(texts, labels, desc="scores").probs.shape == (len(texts), len(labels))
    assert {"plain: sweep", "plain: scores"} <= set(model.ledger.calls)
    assert model.ledger.totals()["engine"] == model.engine.reason
    assert hooked_forward(model.handle, texts, labels).probs.shape == (len(texts), len(labels))


def test_every_fast_family_is_in_the_suite() -> None:
    """A family joins the fast table only with the suite run on it."""
    assert architectures.FAST <= set(FAMILIES) and len(FAMILIES) >= 15
