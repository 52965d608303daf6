"""Shared fixtures: a tiny random Llama model with a word-level tokenizer, saved to a folder and loaded back
through the real local-folder path of `llmaudit.models.load_model`."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]

# Words the tests use; each is one token (word-level vocabulary, whitespace pre-tokenizer).
WORDS = (
    "female male woman man she he her him black white "
    "the a an is was who nurse doctor engineer teacher wrote about person job new started "
    "one sentence write describe story of and in on to with for this that it they said good bad "
    "approve deny yes no answer question loan credit applicant user assistant system"
).split()
SPECIAL = ["<unk>", "<eos>", "<bos>", "<|user|>", "<|assistant|>", "<|system|>"]

CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|> {{ m['content'] }} <eos> {% endfor %}"
    "{% if add_generation_prompt %}<|assistant|> {% endif %}"
)


def shipped_profiles(root: Path = ROOT) -> list[str]:
    """The params files the project ships, by name: those git tracks in params/ (a file someone left there untracked
    is not one, so it neither fails the suite nor joins its profiles); outside a git checkout, every params/*.yaml."""
    try:
        listed = subprocess.run(["git", "-C", str(root), "ls-files", "-z", "--", ":(glob)params/*.yaml"],
                                capture_output=True, check=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return sorted(p.stem for p in (root / "params").glob("*.yaml"))
    return sorted(Path(name).stem for name in listed.split("\0") if name and (root / name).is_file())


def build_tokenizer():
    """A PreTrainedTokenizerFast over WORDS (plus capitalised forms, punctuation and filler ids)."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab: dict[str, int] = {}
    for token in [*SPECIAL, *WORDS, *(w.capitalize() for w in WORDS), ".", ",", "?", "!", ":"]:
        vocab.setdefault(token, len(vocab))
    for i in range(len(vocab), 256):  # filler tokens so the vocabulary has a few hundred entries
        vocab[f"tok{i}"] = i
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, unk_token="<unk>", eos_token="<eos>", pad_token="<eos>", bos_token="<bos>"
    )
    fast.add_special_tokens({"additional_special_tokens": ["<|user|>", "<|assistant|>", "<|system|>"]})
    fast.chat_template = CHAT_TEMPLATE
    return fast


def lower_positions(model, texts: list[str], batch_tokens: int) -> int:
    """Token positions a sweep's pass through one block below the edit runs on: the continuations after the shared
    beginning, packed (token trees where the model's window allows) and batched as the sweep does, padding
    included."""
    from llmaudit.models.passes.packing import packed_batches
    from llmaudit.models.passes.prefix import shareable

    encoded = model.encode(texts)
    shared = shareable(model.hf, encoded)
    batches = packed_batches(model.hf, [e[shared:] for e in encoded], model.tokenizer.pad_token_id, batch_tokens,
                             shared)
    return sum(batch.ids.numel() for batch in batches)


def build_hf_model(vocab_size: int):
    """A seeded random 4-block Llama (hidden 32, 2 heads) in float32 eval mode."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=4,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=256,
        tie_word_embeddings=False,
        bos_token_id=2,
        eos_token_id=1,
        pad_token_id=1,
    )
    model = LlamaForCausalLM(config)
    # Random init has tiny weights; widen the output layer so label probabilities differ visibly.
    with torch.no_grad():
        model.lm_head.weight.mul_(20.0)
    return model.eval()


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory):
    """Folder with config.json, safetensors weights and tokenizer files of the tiny model."""
    folder = tmp_path_factory.mktemp("tiny-llama")
    tokenizer = build_tokenizer()
    build_hf_model(len(tokenizer)).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="session")
def tiny_model(tiny_model_dir):
    """The tiny model loaded through `load_model` (real local-folder path)."""
    from llmaudit.models import load_model
    from llmaudit.models.loading.spec import ModelSpec

    return load_model("tiny", ModelSpec(path=str(tiny_model_dir)))


@pytest.fixture
def bind(monkeypatch):
    """`bind(model, **settings)`: the model with the runtime `settings` (`models.request.Runtime`: cache, batch_tokens,
    lambda_batch) bound, as a chapter binds its audit's, until the test ends; returns the model."""
    from llmaudit.models.request import Runtime

    def bound(model, **settings):
        monkeypatch.setattr(model, "runtime", Runtime(**settings))
        return model

    return bound


def pytest_sessionstart(session) -> None:
    """nbval: start from the results file the reference notebooks were made with, and no cached passes. An audit
    commits each chapter's rows before the next chapter runs, and later chapters read them (the verdict page's gates in
    Table 2.1); nbval executes the notebooks without committing, so their report folder is given the ci audit's results
    instead. The chapters share one cache within the session, as an audit's do (robustness reads the decision tasks'
    passes), and none from an earlier session, which another version of the libraries may have computed."""
    if not session.config.getoption("nbval", default=False):
        return
    import shutil
    from pathlib import Path

    here = Path(__file__).resolve().parent
    folder = here.parent / "reports" / "nbval"
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(here / "notebooks" / "results.csv", folder / "results.csv")
    shutil.rmtree(folder / "cache", ignore_errors=True)
    for pending in folder.glob(".results.csv.*.pending"):  # rows of an earlier session: compared by none of this one's
        pending.unlink()


def pytest_collection_modifyitems(config, items) -> None:
    """nbval: the numbers a cell prints agree with the reference within the spread measured across CPUs, everything
    else exactly (tests/tolerance.py); nbval's own exact comparison then reports only the real differences."""
    if not config.getoption("nbval", default=False):
        return
    from nbval.plugin import IPyNbCell

    from tolerance import CELL_TOLERANCE, align_outputs

    def within_tolerance(exact):
        return lambda test, ref, skip_compare=None: exact(align_outputs(test, ref, CELL_TOLERANCE), ref, skip_compare)

    for item in items:
        if isinstance(item, IPyNbCell):
            item.compare_outputs = within_tolerance(item.compare_outputs)


def pytest_collectstart(collector) -> None:
    """nbval: compare text outputs only; charts (SVG), HTML twins of tables and stderr progress bars vary or
    duplicate what text/plain already holds."""
    if collector.fspath and collector.fspath.ext == ".ipynb":
        collector.skip_compare += ("image/svg+xml", "text/html", "stderr")


@pytest.fixture(scope="session")
def mirror():
    """The shared data mirror ($LLMAUDIT_DATA or /work/shared/data), or skip the test."""
    from pathlib import Path

    root = Path(os.environ.get("LLMAUDIT_DATA") or "/work/shared/data")
    for key in ("llm-steering-audit/eval_data/south-german-data.jsonl", "llm-steering-audit/eval_data/admissions.json"):
        if not (root / key).is_file():
            pytest.skip(f"data mirror {root} lacks {key}: set LLMAUDIT_DATA to a mirror of the upstream data")
    return root


@pytest.fixture
def ran(monkeypatch) -> list[tuple]:
    """execute_chapter replaced by a recorder: the audit's plumbing runs, no notebook is executed."""
    from llmaudit.report import card
    from llmaudit.runner import audit

    calls = []

    def record(chapter, params_file, report_dir, output, use_cache=True, progress=True, can=None):
        calls.append((chapter, params_file, report_dir, output))
        return output

    monkeypatch.setattr(audit, "execute_chapter", record)
    monkeypatch.setattr(card, "_git_commit", lambda: None)
    return calls
