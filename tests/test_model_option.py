"""`llmaudit audit --model <hub id or folder>`: an audit without a params file, at a shipped profile's sizes, into a
report folder named after the model that holds the params it ran with; a tokenizer the audit cannot read stops with
one line saying what to set, before any chapter runs."""

from __future__ import annotations

import json

import pandas as pd
import pytest
import yaml

from conftest import build_hf_model, build_tokenizer
from llmaudit.cli import main
from llmaudit.config import load_params
from llmaudit.models.loading.standin import build
from llmaudit.report import card
from llmaudit.runner import adhoc, audit
from test_hostile_state import one_line_exit_2


def test_a_model_folder_audits_at_ci_sizes_into_a_report_named_after_it(tmp_path, mirror, monkeypatch) -> None:
    monkeypatch.setenv("LLMAUDIT_DATA", str(mirror))
    folder = build("tiny", tmp_path / "tiny-standin")  # a random Llama with the default model's tokenizer
    reports = tmp_path / "reports"
    argv = ["audit", "--model", str(folder), "--profile", "ci", "--chapter", "steering_vectors", "--reports",
            str(reports)]
    assert main(argv) == 0
    report = reports / "tiny-standin"
    params = load_params(report / adhoc.PARAMS_FILE)  # the params it ran with, loadable as they are
    assert params.name == "tiny-standin" and params.model.path == str(folder.resolve())
    assert params.steering == load_params("ci").steering  # the profile's sizes and settings
    card = json.loads((report / "model_card.json").read_text(encoding="utf-8"))
    assert card["params"]["file"] == adhoc.PARAMS_FILE and card["model"]["source"] == str(folder.resolve())
    results = pd.read_csv(report / "results.csv")
    assert (results["chapter"] == "steering_vectors").any() and (report / "report.html").is_file()
    assert sorted(p.name for p in (report / "vectors").glob("*.safetensors"))


def test_a_hub_id_names_its_report_as_lm_evaluation_harness_does() -> None:
    assert adhoc.report_name("Qwen/Qwen3-8B") == "Qwen__Qwen3-8B"
    assert adhoc.model_source("Qwen/Qwen3-8B") == {"hf": "Qwen/Qwen3-8B"}


def test_built_params_keep_the_profile_and_take_the_device_and_settings(tmp_path) -> None:
    folder = tmp_path / "m"
    build_hf_model(64).save_pretrained(folder)
    params = adhoc.built_params(str(folder), profile="paper", device="cpu",
                                settings=["tasks.sizes.credit=0", "model.chat_template=false"])
    assert params["model"] == {"path": str(folder.resolve()), "dtype": "bfloat16", "device": "cpu",
                               "chat_template": False}
    assert params["tasks"]["sizes"]["credit"] == 0 and params["tasks"]["lambda_batch"] == 11
    assert "compare_with" not in adhoc.built_params(str(folder)).get("similarity", {})


@pytest.fixture
def word_level(tmp_path):
    """A model folder whose word-level tokenizer knows none of the judicial answer words (each is one unknown
    token); `chat` decides whether it has a chat template."""

    def make(chat: bool):
        tokenizer = build_tokenizer()
        if not chat:
            tokenizer.chat_template = None
        folder = tmp_path / ("chat" if chat else "base")
        build_hf_model(len(tokenizer)).save_pretrained(folder)
        tokenizer.save_pretrained(folder)
        return folder

    return make


@pytest.fixture
def no_chapter(monkeypatch) -> list:
    """The audit's chapters replaced by a recorder: a check that should stop the run stops it before any."""
    ran: list = []
    monkeypatch.setattr(audit, "execute_chapter", lambda *args, **kwargs: ran.append(args))
    monkeypatch.setattr(card, "_git_commit", lambda: None)
    return ran


def test_a_tokenizer_without_chat_template_says_what_to_set(tmp_path, word_level, no_chapter, capsys) -> None:
    argv = ["audit", "--model", str(word_level(chat=False)), "--reports", str(tmp_path / "r")]
    capsys.readouterr()  # the folder's writing
    one_line_exit_2(capsys, argv, "no chat template", "--set model.chat_template=false")
    assert not no_chapter and not (tmp_path / "r").exists()


def test_a_thinking_template_says_to_turn_thinking_off(tmp_path, word_level, no_chapter, capsys) -> None:
    """A hybrid thinking template (Qwen3's takes enable_thinking) would put a think block where the answer is read."""
    from transformers import AutoTokenizer

    folder = word_level(chat=True)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    tokenizer.chat_template += "{% if enable_thinking is defined and not enable_thinking %}<think> </think> {% endif %}"
    tokenizer.save_pretrained(folder)
    argv = ["audit", "--model", str(folder), "--reports", str(tmp_path / "r")]
    capsys.readouterr()
    one_line_exit_2(capsys, argv, "thinking block", "--set model.template_options.enable_thinking=false")
    assert not no_chapter


def test_template_options_reach_the_chat_template(tiny_model) -> None:
    """`model.template_options` are the chat template's keyword arguments (Qwen3: enable_thinking: false)."""
    tokenizer = tiny_model.tokenizer
    plain = tiny_model.chat("the nurse said")
    tokenizer.chat_template += "{% if enable_thinking is defined and not enable_thinking %}<think> </think> {% endif %}"
    try:
        assert tiny_model.chat("the nurse said") == plain
        tiny_model.template_options = {"enable_thinking": False}
        assert tiny_model.chat("the nurse said") == plain + "<think> </think> "
    finally:
        tiny_model.template_options = {}
        tokenizer.chat_template = tokenizer.chat_template.split("{% if enable_thinking")[0]


def test_answer_words_sharing_a_first_token_say_what_to_set(tmp_path, word_level, no_chapter, capsys) -> None:
    argv = ["audit", "--model", str(word_level(chat=True)), "--profile", "ci", "--reports", str(tmp_path / "r")]
    capsys.readouterr()  # the folder's writing
    line = one_line_exit_2(capsys, argv, "share a first token", "--set tasks.sizes.judicial_conviction=0",
                           "acquitted, convicted")
    assert "tasks.sizes.credit" not in line  # Good and Bad are two tokens of this vocabulary
    assert not no_chapter


def test_skipping_the_tasks_whose_answers_clash_lets_the_audit_start(tmp_path, word_level, no_chapter) -> None:
    clashing = ["judicial_conviction", "judicial_penalty", "medical_gender", "medical_race"]
    argv = ["audit", "--model", str(word_level(chat=True)), "--profile", "ci", "--reports", str(tmp_path / "r"),
            "--chapter", "decision_tasks", *(f"--set=tasks.sizes.{task}=0" for task in clashing)]
    assert main(argv) == 0 and len(no_chapter) == 1  # past the check: the (recorded) chapter ran
    written = yaml.safe_load((tmp_path / "r" / "chat" / adhoc.PARAMS_FILE).read_text(encoding="utf-8"))
    assert all(written["tasks"]["sizes"][task] == 0 for task in clashing)


def test_a_gpu_profile_without_a_gpu_says_to_run_on_the_cpu(no_chapter, monkeypatch, capsys) -> None:
    monkeypatch.setattr(adhoc, "_has_gpu", lambda: False)
    one_line_exit_2(capsys, ["audit", "--model", "Qwen/Qwen3-8B", "--profile", "paper"], "add --device cpu")
    assert not no_chapter


@pytest.mark.parametrize("argv, needle", [
    (["audit"], "one of the two"),
    (["audit", "ci", "--model", "Qwen/Qwen3-8B"], "one of the two"),
    (["audit", "ci", "--profile", "paper"], "go with --model"),
    (["audit", "--model", "/no/such/folder"], "no such folder"),
    (["audit", "--model", "Qwen/Qwen3-8B", "--profile", "huge"], "unknown profile 'huge'"),
    (["audit", "--model", "Qwen/Qwen3-8B", "--set", "tasks.sizes.credit"], "give KEY=VALUE"),
    (["audit", "--model", "Qwen/Qwen3-8B", "--device", "tpu"], "device"),
    (["audit", "--model", "Qwen/Qwen3-8B", "--set", "tasks.sizez={}"], "unknown key 'sizez'"),
])
def test_bad_input_is_one_line(argv, needle, no_chapter, capsys) -> None:
    one_line_exit_2(capsys, argv, needle)
    assert not no_chapter
