"""Hostile models and settings for an audit (issue 57): one report folder belongs to one model (a second model of the
same folder name is refused before it writes anything and told how to name its own), every `--set` value is read as
a params file is, a model's config.json as a report file is, and a model folder's weights are checked against its
config before any chapter starts; every error line quotes at most a few hundred characters of any input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from conftest import build_hf_model, build_tokenizer
from llmaudit.cli import main
from llmaudit.config import load_params
from llmaudit.paths import PARAMS_DIR
from llmaudit.runner import adhoc
from test_hostile_state import PROGRESS, one_line_exit_2


@pytest.fixture
def model_folder():
    """A tiny random Llama with a word-level tokenizer saved to a folder (as save_pretrained writes one)."""

    def make(folder: Path) -> Path:
        tokenizer = build_tokenizer()
        build_hf_model(len(tokenizer)).save_pretrained(folder)
        tokenizer.save_pretrained(folder)
        return folder

    return make


def audit_args(model: str | Path, reports: Path, *more: str) -> list[str]:
    """`llmaudit audit --model` at the ci profile's sizes, one chapter whose answers any tokenizer can give."""
    return ["audit", "--model", str(model), "--profile", "ci", "--chapter", "steering_vectors", "--reports",
            str(reports), *more]


def contents(folder: Path) -> dict[str, bytes]:
    """Every file of a report folder by its relative path, but the lock (whose holder's pid comes and goes)."""
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file() and p.name != ".audit.lock"}


# --- 1: one report folder, one model -----------------------------------------------------------------------------


def test_a_second_model_of_the_same_folder_name_leaves_the_first_audit_intact(tmp_path, model_folder, ran,
                                                                             capsys) -> None:
    """The old code gave `.../A/model` and `.../B/model` one folder: B's audit replaced A's params and vectors."""
    a, b = model_folder(tmp_path / "A" / "model"), model_folder(tmp_path / "B" / "model")
    reports, folder = tmp_path / "reports", tmp_path / "reports" / "model"
    assert main(audit_args(a, reports)) == 0
    (folder / "vectors").mkdir()
    (folder / "vectors" / "gender_lang.safetensors").write_bytes(b"A's vector")  # as A's steering chapter saves it
    (folder / "cache").mkdir()
    (folder / "cache" / "entry.safetensors").write_bytes(b"A's forward passes")
    before = contents(folder)
    capsys.readouterr()
    line = one_line_exit_2(capsys, audit_args(b, reports), "belongs to", str(a.resolve()), "--name")
    assert str(b.resolve()) in line and contents(folder) == before and len(ran) == 1

    assert main(audit_args(b, reports, "--name", "model-b")) == 0  # B in a folder of its own
    assert load_params(reports / "model-b" / adhoc.PARAMS_FILE).model.path == str(b.resolve())
    assert main(audit_args(a, reports)) == 0 and main(audit_args(b, reports, "--name", "model-b")) == 0  # reruns
    written_b = reports / "model-b" / adhoc.PARAMS_FILE  # B's params as written, rerun as a params file
    assert main(["audit", str(written_b), "--reports", str(reports), "--chapter", "steering_vectors"]) == 0
    # A's rerun kept its params, vectors and cache (its results file and card carry the rerun's date, to the minute)
    dated = ("results.json", "model_card.json")
    assert {k: v for k, v in contents(folder).items() if k not in dated} == {
        k: v for k, v in before.items() if k not in dated}
    assert [call[0] for call in ran] == ["steering_vectors"] * 5


@pytest.mark.parametrize("record", ["[1]", '{"model": {}}', "{", "\ud800"])
def test_a_damaged_ownership_record_is_one_line(tmp_path, model_folder, ran, capsys, record) -> None:
    (tmp_path / "r" / "m").mkdir(parents=True)
    (tmp_path / "r" / "m" / "model_source.json").write_text(record, encoding="utf-8", errors="surrogatepass")
    folder = model_folder(tmp_path / "m")
    capsys.readouterr()
    one_line_exit_2(capsys, audit_args(folder, tmp_path / "r"), "model_source.json", "delete it")
    assert not ran


def test_a_params_file_naming_another_model_is_refused_before_it_writes(tmp_path, model_folder, ran,
                                                                        capsys) -> None:
    params = yaml.safe_load((PARAMS_DIR / "ci.yaml").read_text(encoding="utf-8"))
    reports = tmp_path / "reports"
    for which in ("a", "b"):
        (tmp_path / f"{which}.yaml").write_text(yaml.safe_dump(
            params | {"model": {"path": str(model_folder(tmp_path / which / "m"))}}), encoding="utf-8")
    assert main(["audit", str(tmp_path / "a.yaml"), "--reports", str(reports), "--chapter", "steering_vectors"]) == 0
    before = contents(reports / "ci")
    capsys.readouterr()
    one_line_exit_2(capsys, ["audit", str(tmp_path / "b.yaml"), "--reports", str(reports)], "belongs to",
                    str((tmp_path / "a" / "m").resolve()), "name:", "--reports")
    assert contents(reports / "ci") == before and len(ran) == 1


def test_hub_ids_that_meet_in_one_folder_name_are_told_apart(tmp_path, ran, monkeypatch, capsys) -> None:
    """`a/b` and `a__b` both name the folder a__b."""
    monkeypatch.setattr(adhoc, "check_tokenizer", lambda *args: None)  # no hub here: their tokenizers are not read
    assert main(audit_args("a/b", tmp_path)) == 0
    capsys.readouterr()
    one_line_exit_2(capsys, audit_args("a__b", tmp_path), "belongs to", "a/b", "--name")
    assert main(audit_args("a__b", tmp_path, "--name", "a__b-2")) == 0 and len(ran) == 2


# --- 2: every --set value and a model's config.json are read within bounds -----------------------------------------


def laughs(levels: int = 9) -> str:
    """A YAML value whose aliases expand 9 levels of 9."""
    anchors = ['&a0 ["lol"]', *(f"&a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, levels + 1))]
    return "[" + ", ".join(anchors) + "]"


@pytest.mark.parametrize("setting, needle", [
    ("seed=" + "1" * 5000, "--set seed=111"),  # Python's limit on the digits of an integer
    ("seed=2024-13-01", "month must be in 1..12"),  # YAML reads a date
    ("seed=" + "[" * 5000 + "]" * 5000, "nested deeper than"),
    ("seed=" + laughs(), "aliases"),
    ("a." * 5000 + "b=1", "nested deeper than"),
])
def test_a_bad_set_value_is_one_line(tmp_path, model_folder, ran, capsys, setting, needle) -> None:
    folder = model_folder(tmp_path / "m")
    capsys.readouterr()
    one_line_exit_2(capsys, audit_args(folder, tmp_path / "r", "--set", setting), needle)
    assert not ran


@pytest.mark.parametrize("config, needle", [
    ("[1, 2]", "not a mapping"),
    ("[" * 100_000 + "]" * 100_000, "nested deeper than"),
    ('{"model_type": "llama", "hidden_size": "wide"}', "config.json"),
    ('{"model_type": "no-such-family"}', "config.json"),
    ('{"model_type": "llama", "num_hidden_layers": 1000000000}', "1000000000 blocks"),
    ('{"model_type": "llama", "num_hidden_layers": 0}', "0 blocks"),
    ('{"model_type": "llama", "vocab_size": -5}', "config.json"),  # no warnings of transformers' beside the line
])
def test_a_bad_config_json_is_one_line(tmp_path, model_folder, ran, capsys, config, needle) -> None:
    folder = model_folder(tmp_path / "m")
    (folder / "config.json").write_text(config, encoding="utf-8")
    capsys.readouterr()
    one_line_exit_2(capsys, audit_args(folder, tmp_path / "r"), needle)
    assert not ran


# --- 3: the weights are there, and of the config's shape, before any chapter starts --------------------------------


def test_a_folder_without_weights_is_one_line_before_any_chapter(tmp_path, model_folder, ran, capsys) -> None:
    """The old code found out inside the first chapter, after loading everything else (about 30 s)."""
    folder = model_folder(tmp_path / "m")
    (folder / "model.safetensors").unlink()
    capsys.readouterr()
    one_line_exit_2(capsys, audit_args(folder, tmp_path / "r"), "no weights", "model.safetensors")
    assert not ran and not (tmp_path / "r").exists()


def test_weights_of_another_shape_than_the_config_are_one_line(tmp_path, model_folder, ran, capsys) -> None:
    folder = model_folder(tmp_path / "m")
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    (folder / "config.json").write_text(json.dumps(config | {"intermediate_size": 96}), encoding="utf-8")
    capsys.readouterr()
    one_line_exit_2(capsys, audit_args(folder, tmp_path / "r"), "model.layers.0.mlp.gate_proj.weight", "[64, 32]",
                    "[96, 32]")
    assert not ran


def test_a_shard_the_index_names_must_be_there(tmp_path, model_folder, ran, capsys) -> None:
    folder = model_folder(tmp_path / "m")
    (folder / "model.safetensors").rename(folder / "model-00001-of-00002.safetensors")
    weight_map = {"model.embed_tokens.weight": "model-00001-of-00002.safetensors",
                  "lm_head.weight": "model-00002-of-00002.safetensors"}
    (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}), encoding="utf-8")
    capsys.readouterr()
    one_line_exit_2(capsys, audit_args(folder, tmp_path / "r"), "model-00002-of-00002.safetensors")
    assert not ran


def test_a_damaged_weights_file_is_one_line(tmp_path, model_folder, ran, capsys) -> None:
    folder = model_folder(tmp_path / "m")
    (folder / "model.safetensors").write_bytes(b"\x10\x00")
    capsys.readouterr()
    one_line_exit_2(capsys, audit_args(folder, tmp_path / "r"), "model.safetensors", "damaged")
    assert not ran


def test_a_params_file_model_path_without_weights_is_one_line(tmp_path, model_folder, ran, capsys) -> None:
    folder = model_folder(tmp_path / "m")
    (folder / "model.safetensors").unlink()
    params = yaml.safe_load((PARAMS_DIR / "ci.yaml").read_text(encoding="utf-8")) | {"model": {"path": "m"}}
    (tmp_path / "p.yaml").write_text(yaml.safe_dump(params), encoding="utf-8")
    capsys.readouterr()
    one_line_exit_2(capsys, ["audit", str(tmp_path / "p.yaml"), "--reports", str(tmp_path / "r")], "no weights")
    assert not ran


# --- 4: an error line quotes a few hundred characters of any input at most ----------------------------------------

LONG = "x" * 100_000


@pytest.mark.parametrize("argv", [
    ["audit", "--model", LONG],
    ["audit", "--model", "a/" + LONG],
    ["audit", LONG],
    ["audit", LONG + ".yaml"],
    ["audit", "--model", "Qwen/Qwen3-8B", "--profile", LONG],
    ["audit", "--model", "Qwen/Qwen3-8B", "--set", LONG],
    ["audit", "--model", "Qwen/Qwen3-8B", "--set", "seed=[" + LONG],
    ["audit", "--model", "Qwen/Qwen3-8B", "--set", LONG + "=1"],
    ["audit", "--model", "Qwen/Qwen3-8B", "--name", LONG],
    ["audit", "ci", "--chapter", LONG],
])
def test_an_error_line_quotes_a_few_hundred_characters_of_an_input(argv, ran, capsys) -> None:
    code = main(argv)
    lines = [line for line in capsys.readouterr().err.strip().splitlines() if not PROGRESS.match(line)]
    assert code == 2 and len(lines) == 1 and len(lines[0]) < 1000, (code, [line[:300] for line in lines])
    assert not ran
