"""The split sweep engine against the plain steered forward on tiny random models of every supported architecture,
with sliding-window blocks mixed with global ones where the architecture has them (a window of 4 tokens, shorter
than every prompt), steering layers below and above a sliding block, left-padded batches, and prompts that share
nested beginnings packed as token trees where the window allows."""

from __future__ import annotations

import pytest
import torch

from conftest import build_tokenizer, lower_positions
from llmaudit.chapters.steering_vectors import SteeringVector
from llmaudit.ledger import Ledger
from llmaudit.models import AuditModel
from llmaudit.models.ask import ask
from llmaudit.models.loading import architectures
from llmaudit.models.passes.blocks import running
from llmaudit.models.passes.layers import hidden, with_hidden
from llmaudit.models.passes.prefix import shareable
from llmaudit.models.passes.sweep import split_sweep
from llmaudit.models.request import Edit, Request

SLIDING, FULL = "sliding_attention", "full_attention"
# Not periodic, so that running the upper blocks with the loop position in place of the block index gives
# some block the other kind of attention whichever steering layer is chosen.
LAYER_TYPES = [SLIDING, FULL, SLIDING, SLIDING, FULL, SLIDING]
WINDOW = 4

# model_type -> (config class, architecture-specific config fields); the sweep tests take the shared conftest model
# for llama, whose key/value heads are not grouped (test_attention.py builds this one).
CONFIGS: dict[str, tuple[str, dict]] = {
    "llama": ("LlamaConfig", {}),
    "qwen2": ("Qwen2Config", {"use_sliding_window": True, "sliding_window": WINDOW, "layer_types": LAYER_TYPES}),
    "mistral": ("MistralConfig", {"sliding_window": WINDOW}),  # MistralModel has one window for every block
    # MinistralConfig leaves head_dim None, which MinistralAttention cannot use: give it explicitly
    "ministral": ("MinistralConfig", {"sliding_window": WINDOW, "layer_types": LAYER_TYPES, "head_dim": 8}),
    "gemma3_text": ("Gemma3TextConfig", {"sliding_window": WINDOW, "layer_types": LAYER_TYPES, "head_dim": 8,
                                         "query_pre_attn_scalar": 8}),
}
WINDOWED = ["qwen2", "mistral", "ministral", "gemma3_text"]
ARCHITECTURES = ["llama", *WINDOWED]
# Steering layers: (below a sliding block, above one) for the six-block models; any two for the 4-block Llama.
STEERING_LAYERS = {arch: (1, 3) for arch in ARCHITECTURES} | {"llama": (1, 2)}
# (arch, steering layer of STEERING_LAYERS, projection, window) the exactness tests run. Llama has no window and
# always shares its beginning and packs token trees: it takes every steering layer with and without projection.
# A windowed model needs its own masks on both engine paths: its window of 4 (no shared beginning, the sliding
# masks picked by layer type, steering below a sliding block so that every upper block's type is checked) and an
# unlimited one (shared beginning and token trees, steering above a sliding block); projection is the edit's, not
# the architecture's, and alternates.
SHAPES = [("llama", which, projection, None) for which in (0, 1) for projection in (True, False)] + [
    shape for arch in WINDOWED for shape in ((arch, 0, True, None), (arch, 1, False, 10_000))
]
# (arch, window): every engine path of every architecture, for the test that reads blocks.
WINDOWS = [("llama", None)] + [(arch, window) for arch in WINDOWED for window in (None, 10_000)]
LAMBDAS = [-1.0, 0.0, 0.5, 1.0]

PROMPTS = [
    "she",
    "the nurse started a new job and she said that it was good",
    "the nurse started a new job and she said that it was bad",  # variants sharing a beginning, then a middle
    "the nurse started a new job . he said it was good",
    "write one sentence about a doctor who started a new job . the doctor said it was good and bad",
    "a woman and a man",
    "describe the engineer who wrote about the teacher",
]


def build_model(model_type: str) -> AuditModel:
    """A seeded random six-block model of `model_type` (hidden 32, 4 heads, 2 KV heads) with the conftest tokenizer,
    wrapped as `load_model` wraps a local model (a saved folder would not do: AutoTokenizer swaps the word-level
    tokenizer for the architecture's own class, e.g. Qwen2Tokenizer)."""
    import transformers
    from nnsight import TransformersModel
    from transformers import AutoModelForCausalLM

    tokenizer = build_tokenizer()
    name, fields = CONFIGS[model_type]
    config = getattr(transformers, name)(
        vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=6, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=256, tie_word_embeddings=False, bos_token_id=2,
        eos_token_id=1, pad_token_id=1, **fields,
    )
    assert config.model_type == model_type
    torch.manual_seed(0)
    hf = AutoModelForCausalLM.from_config(config).eval()
    with torch.no_grad():
        hf.lm_head.weight.mul_(20.0)  # visible differences between label probabilities, as in conftest
    return AuditModel(model_type, TransformersModel(hf, task="text-generation", tokenizer=tokenizer), tokenizer, hf=hf)


@pytest.fixture(scope="module")
def models(request):
    """model_type -> AuditModel, built on first use."""
    built = {"llama": request.getfixturevalue("tiny_model")}

    def get(model_type: str) -> AuditModel:
        if model_type not in built:
            built[model_type] = build_model(model_type)
        return built[model_type]

    return get


def texts_of(model) -> list[str]:
    return [model.chat(p, "answer :") for p in PROMPTS]


def labels_of(model) -> list[int]:
    return model.single_token_ids(["she", "he", "yes"])


def random_vector(model, layer: int) -> SteeringVector:
    """A seeded random unit direction at `layer`, centred on the mean activation of the test prompts."""
    acts = model.forward(texts_of(model), labels_of(model), layers=[layer]).acts[:, 0]
    generator = torch.Generator().manual_seed(7)
    direction = torch.nn.functional.normalize(torch.randn(model.width, generator=generator), dim=0)
    return SteeringVector("v", "gender", layer, direction, acts.mean(0), k=2.5)


def hooked_metric(model, text: str, labels: list[int], target: int, vector, lam: torch.Tensor, projection: bool):
    """p[target] / sum(p) over `labels` of one text from the model's own forward, the edit made by a forward hook
    on the steering block (differentiable in `lam`)."""
    edit = vector.intervention(lam, projection)
    block = architectures.blocks(model.hf)[vector.layer]
    handle = block.register_forward_hook(lambda module, args, output: with_hidden(output, edit(hidden(output))))
    try:
        ids = torch.tensor([model.tokenizer.encode(text, add_special_tokens=False)])
        probs = torch.softmax(model.hf(input_ids=ids).logits[0, -1].float(), dim=-1)[labels]
    finally:
        handle.remove()
    return probs[target] / probs.sum()


def shared_beginning(model, texts: list[str], window: int | None, monkeypatch) -> int:
    """With `window`, every sliding block sees the whole prompt; returns how many beginning tokens the sweep shares
    (none while the model's own window is shorter than the prompts, see `prefix.shareable`)."""
    if window is not None and hasattr(model.hf.config, "sliding_window"):  # Llama has no window
        monkeypatch.setattr(model.hf.config, "sliding_window", window)
    return shareable(model.hf, model.encode(texts))


@pytest.mark.parametrize(("arch", "which", "projection", "window"), SHAPES)
def test_sweep_equals_plain_steered_forward(bind, models, arch, which, projection, window, monkeypatch) -> None:
    model = models(arch)
    texts, labels = texts_of(model), labels_of(model)
    shared = shared_beginning(model, texts, window, monkeypatch)
    assert (shared > 0) == (window is not None or arch == "llama")  # the shared-beginning path, where it applies
    vector = random_vector(model, STEERING_LAYERS[arch][which])
    edit = Edit(vector=vector, lambdas=LAMBDAS, projection=projection)
    engine = ask(bind(model, batch_tokens=60, lambda_batch=2),
                 Request(texts=texts, labels=labels, edit=edit)).probs
    reference = torch.stack(
        [model.forward(texts, labels, intervention=vector.intervention(lam, projection)).probs for lam in LAMBDAS]
    )
    assert engine.shape == (len(LAMBDAS), len(texts), len(labels))
    torch.testing.assert_close(engine, reference, atol=1e-5, rtol=0)
    assert (engine[0] - engine[-1]).abs().max() > 1e-3  # steering moves the answers


@pytest.mark.parametrize(("arch", "window"), WINDOWS)
def test_sweep_reads_blocks_and_the_unsteered_model_as_the_traced_forward(models, arch, window, monkeypatch) -> None:
    """Lambda None is the model unsteered; blocks below, at and above the steering block read at the last token."""
    model = models(arch)
    texts, labels = texts_of(model), labels_of(model)
    shared_beginning(model, texts, window, monkeypatch)
    layer = STEERING_LAYERS[arch][1]
    vector, layers, lambdas = random_vector(model, layer), [0, layer, model.n_layers - 1], [None, -1.0, 1.0]
    swept = split_sweep(model.handle, texts, labels, vector, lambdas, None, batch_tokens=60, lambda_batch=2,
                        layers=layers)
    assert swept.acts.shape == (len(lambdas), len(texts), len(layers), model.width)
    for i, lam in enumerate(lambdas):
        edit = None if lam is None else vector.intervention(lam)
        want = model.forward(texts, labels, layers, intervention=edit, traced=True)
        torch.testing.assert_close(swept.probs[i], want.probs, atol=1e-5, rtol=0)
        torch.testing.assert_close(swept.acts[i], want.acts, atol=1e-4, rtol=1e-4)
    assert (swept.acts[1, :, 1:] - swept.acts[2, :, 1:]).abs().max() > 1e-2  # the edit moves the blocks it reaches
    torch.testing.assert_close(swept.acts[1, :, 0], swept.acts[2, :, 0], atol=0, rtol=0)  # and none below it


@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_a_sweep_from_kept_lower_states_equals_one_from_the_tokens(models, arch) -> None:
    """States kept at the lower vector's block by a sweep along the higher one start sweeps along either vector (the
    other vector of a concept, the same vector with another edit) with the same answers and derivatives, and the
    continuations run no block below the states'. Each architecture once, with its own window: starting from states
    changes what runs, not the masks, which the tests above check on both paths."""
    model = models(arch)
    texts, labels = texts_of(model), labels_of(model)
    targets = [i % len(labels) for i in range(len(texts))]
    low, high = (random_vector(model, layer) for layer in STEERING_LAYERS[arch])
    encoded = model.encode(texts)
    first = split_sweep(model.handle, texts, labels, high, LAMBDAS, targets, batch_tokens=60, keep=low.layer)
    assert first.states.block == low.layer and [len(s) for s in first.states.states] == list(map(len, encoded))
    padded = lower_positions(model, texts, 60)  # the continuations' batches
    for vector, projection in ((low, True), (high, False)):
        model.ledger = Ledger(model.n_layers)
        plain = split_sweep(model.handle, texts, labels, vector, LAMBDAS, targets, projection, batch_tokens=60)
        from_tokens, model.ledger = model.ledger, Ledger(model.n_layers)
        started = split_sweep(model.handle, texts, labels, vector, LAMBDAS, targets, projection, batch_tokens=60,
                              start=first.states)
        torch.testing.assert_close(started.probs, plain.probs, atol=1e-5, rtol=0)
        torch.testing.assert_close(started.derivative, plain.derivative, atol=1e-5, rtol=1e-4)
        assert from_tokens.actual - model.ledger.actual == padded * (low.layer + 1)  # no block up to the states'
        prefixes = {tuple(e[:i]) for e in encoded for i in range(1, len(e) + 1)}
        assert from_tokens.minimum - model.ledger.minimum == len(prefixes) * (low.layer + 1)  # spared, not needed
    with pytest.raises(ValueError, match="not these prompts"):
        split_sweep(model.handle, texts[1:], labels, high, LAMBDAS, None, start=first.states)


@pytest.mark.parametrize(("arch", "which", "projection", "window"), SHAPES)
def test_derivative_equals_autograd_of_plain_forward(bind, models, arch, which, projection, window,
                                                     monkeypatch) -> None:
    model = models(arch)
    texts, labels = texts_of(model), labels_of(model)
    shared_beginning(model, texts, window, monkeypatch)
    targets = [i % len(labels) for i in range(len(texts))]
    vector = random_vector(model, STEERING_LAYERS[arch][which])
    swept = split_sweep(model.handle, texts, labels, vector, [0.5], targets, projection, batch_tokens=60)
    probs, exact = swept.probs, swept.derivative
    alone = ask(bind(model, batch_tokens=4096), Request(
        texts=texts, labels=labels, targets=targets, edit=Edit(vector=vector, lambdas=(), projection=projection))
    ).derivative
    reference = []
    for i, text in enumerate(texts):
        lam = torch.zeros((), requires_grad=True)
        (grad,) = torch.autograd.grad(hooked_metric(model, text, labels, targets[i], vector, lam, projection), lam)
        reference.append(grad)
        with torch.no_grad():  # the hooked forward is the plain steered forward
            hooked = hooked_metric(model, text, labels, targets[i], vector, torch.tensor(0.5), projection)
        torch.testing.assert_close(hooked, probs[0, i, targets[i]] / probs[0, i].sum(), atol=1e-5, rtol=0)
    torch.testing.assert_close(exact, torch.stack(reference), atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(alone, exact, atol=1e-5, rtol=1e-5)
    assert exact.abs().max() > 1e-3


@pytest.mark.parametrize("arch", WINDOWED)
def test_sliding_window_matters_for_the_test_prompts(models, arch, monkeypatch) -> None:
    """The window is shorter than the prompts: the same weights with an unlimited window answer differently."""
    model = models(arch)
    texts, labels = texts_of(model), labels_of(model)
    assert min(len(model.tokenizer.encode(t, add_special_tokens=False)) for t in texts) > WINDOW
    windowed = model.forward(texts, labels).probs
    monkeypatch.setattr(model.hf.config, "sliding_window", 10_000)
    assert (model.forward(texts, labels).probs - windowed).abs().max() > 1e-4


def test_the_fast_table_holds_the_families_tested_here() -> None:
    assert set(ARCHITECTURES) <= architectures.FAST


def parts(hf) -> list[tuple[str, int]]:
    """Every submodule of the model by name and object identity."""
    return [(name, id(module)) for name, module in hf.named_modules()]


@pytest.mark.parametrize("error", [RuntimeError, KeyboardInterrupt])
def test_running_restores_the_model_after_an_exception(models, error) -> None:
    model = models("gemma3_text")
    hf = model.hf
    inner, before_parts = hf.model, parts(hf)
    layers, norm, attention, config = inner.layers, inner.norm, hf.config._attn_implementation, hf.config.to_dict()
    texts, labels = texts_of(model), labels_of(model)
    before = model.forward(texts, labels).probs
    with pytest.raises(error, match="inside"):
        with running(hf, range(3, 6), final_norm=False, eager_attention=True):
            assert inner.layers is not layers and inner.norm is not norm and hf.config._attn_implementation == "eager"
            assert [block is layers[i] for i, block in enumerate(inner.layers)] == [False] * 3 + [True] * 3
            raise error("inside")
    assert inner.layers is layers and inner.norm is norm and parts(hf) == before_parts
    assert hf.config._attn_implementation == attention and hf.config.to_dict() == config
    assert torch.equal(model.forward(texts, labels).probs, before)


class Failure(Exception):
    """Raised by a test hook in the middle of a sweep."""


@pytest.mark.parametrize("error", [Failure, KeyboardInterrupt])
@pytest.mark.parametrize(("where", "call"), [("lower", 1), ("sweep", 2), ("derivative", 1)])
def test_a_forward_failing_mid_sweep_leaves_the_model_as_it_was(models, where, call, error) -> None:
    """A block that raises on its `call`-th run: in the lower blocks (block 0), in the second lambda group of the
    sweep, or inside the forward-mode derivative (the last block; no lambdas, so the derivative runs it first)."""
    model = models("qwen2")
    hf = model.hf
    texts, labels = texts_of(model), labels_of(model)
    vector = random_vector(model, 2)
    before_parts, attention = parts(hf), hf.config._attn_implementation
    before = model.forward(texts, labels).probs
    with torch.no_grad():
        logits = hf(**model.tokenizer(texts[:1], return_tensors="pt", add_special_tokens=False)).logits
    runs = []

    def fail(module, args, output):
        runs.append(1)
        if len(runs) == call:
            raise error("mid-sweep")

    block = architectures.blocks(hf)[0 if where == "lower" else model.n_layers - 1]
    handle = block.register_forward_hook(fail)
    try:
        with pytest.raises(error, match="mid-sweep"):
            split_sweep(model.handle, texts, labels, vector, [] if where == "derivative" else LAMBDAS,
                        [0] * len(texts), lambda_batch=2)
    finally:
        handle.remove()
    assert len(runs) == call
    assert parts(hf) == before_parts and hf.config._attn_implementation == attention
    assert torch.equal(model.forward(texts, labels).probs, before)
    with torch.no_grad():
        again = hf(**model.tokenizer(texts[:1], return_tensors="pt", add_special_tokens=False)).logits
    assert torch.equal(again, logits)
