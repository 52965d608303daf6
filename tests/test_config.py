"""Tests for params files: the shipped ones load, and every mistake is a one-line ConfigError naming the key."""

from __future__ import annotations

import textwrap

import pytest

from conftest import shipped_profiles
from llmaudit.chapters.decision_tasks import TASKS
from llmaudit.chapters.steering_vectors.spec import SteeringParams
from llmaudit.config import PARAMS_DIR, Params, available_models, load_params
from llmaudit.errors import AuditError, ConfigError
from llmaudit.models.loading.spec import ModelSpec
from llmaudit.registry import KEYS, verdict_tests
from llmaudit.runner.chapter import PRINTED, Chapter

GOOD = """\
name: tiny
model:
  hf: some/model
  dtype: float32
seed: 3
batch_tokens: 512
steering:
  tau: 0.1
  quantile: {gender_lang: 0.2}
  train_rows: {gendered_language: 100, dialect: null}
"""

SIZES = "tasks:\n  sizes: {" + ", ".join(f"{task}: 2" for task in TASKS) + "}\n"  # every task, 2 cases each


def write(tmp_path, text: str):
    path = tmp_path / "p.yaml"
    path.write_text(textwrap.dedent(text))
    return path


def config_error(path_or_name) -> str:
    with pytest.raises(ConfigError) as info:
        load_params(path_or_name)
    message = str(info.value)
    assert "\n" not in message, message
    assert isinstance(info.value, AuditError)
    return message


@pytest.mark.parametrize("name", shipped_profiles())
def test_shipped_params_load(name) -> None:
    params = load_params(name)
    assert isinstance(params, Params) and isinstance(params.model, ModelSpec)
    assert isinstance(params.steering, SteeringParams)
    assert params.name == name
    assert load_params(PARAMS_DIR / f"{name}.yaml") == params


def test_shipped_params_exist() -> None:
    assert "smollm2-135m-instruct" in available_models()


def test_good_file_is_typed(tmp_path) -> None:
    params = load_params(write(tmp_path, GOOD + "chapters: [steering_vectors]\n"))
    assert params.model.hf == "some/model" and params.model.embedded is None
    assert params.seed == 3 and params.batch_tokens == 512
    assert params.steering.tau == 0.1
    assert params.steering.quantile == {"gender_lang": 0.2}
    assert params.steering.train_rows == {"gendered_language": 100, "dialect": None}
    assert params.steering.skip_last_layers == 0.05  # default kept
    assert params.chapters == ["steering_vectors"]


def test_chapters_default_to_every_registered_chapter_in_book_order(tmp_path) -> None:
    """A params file without `chapters:` runs them all (each task at its own default size where none is given)."""
    assert load_params(write(tmp_path, GOOD + SIZES)).chapters == list(KEYS)
    assert load_params(write(tmp_path, GOOD)).chapters == list(KEYS)
    message = config_error(write(tmp_path, GOOD + SIZES + "chapters: [decision_tasks, steering_vector]\n"))
    assert "chapters" in message and "did you mean 'steering_vectors'" in message


def test_int_accepted_for_float(tmp_path) -> None:
    params = load_params(write(tmp_path, GOOD.replace("tau: 0.1", "tau: 0") + SIZES))
    assert params.steering.tau == 0.0 and isinstance(params.steering.tau, float)


def test_bad_yaml_names_line(tmp_path) -> None:
    text = "name: tiny\nmodel:\n  hf: some/model\nseed: [1, 2\nbatch_tokens: 64\n"
    message = config_error(write(tmp_path, text))
    assert "line" in message
    assert any(f"line {n}" in message for n in (4, 5, 6)), message


def test_top_level_not_mapping(tmp_path) -> None:
    config_error(write(tmp_path, "- a\n- b\n"))


def test_unknown_key_suggests(tmp_path) -> None:
    message = config_error(write(tmp_path, GOOD.replace("seed: 3", "sed: 3")))
    assert "sed" in message and "did you mean 'seed'" in message


def test_unknown_nested_key_suggests(tmp_path) -> None:
    message = config_error(write(tmp_path, GOOD.replace("  tau: 0.1", "  taus: 0.1")))
    assert "taus" in message and "did you mean 'tau'" in message and "steering" in message


@pytest.mark.parametrize(
    ("old", "new", "key"),
    [
        ("seed: 3", 'seed: "abc"', "seed"),
        ("seed: 3", "seed: true", "seed"),
        ("seed: 3", "seed: 1.5", "seed"),
        ("  tau: 0.1", "  tau: high", "tau"),
        ("  dtype: float32", "  dtype: [1]", "dtype"),
        ("gendered_language: 100", "gendered_language: many", "gendered_language"),
    ],
)
def test_wrong_type_names_key(tmp_path, old, new, key) -> None:
    message = config_error(write(tmp_path, GOOD.replace(old, new)))
    assert key in message


def test_missing_model(tmp_path) -> None:
    message = config_error(write(tmp_path, "name: tiny\nseed: 1\n"))
    assert "model" in message


def test_two_model_sources(tmp_path) -> None:
    message = config_error(write(tmp_path, GOOD.replace("  hf: some/model", "  hf: some/model\n  path: /tmp/x")))
    assert "hf" in message and "path" in message


def test_no_model_source(tmp_path) -> None:
    config_error(write(tmp_path, GOOD.replace("  hf: some/model\n", "")))


def test_bad_dtype(tmp_path) -> None:
    message = config_error(write(tmp_path, GOOD.replace("dtype: float32", "dtype: int8")))
    assert "dtype" in message


def test_unknown_model_name_lists_known() -> None:
    message = config_error("no-such-model-at-all")
    assert "no-such-model-at-all" in message
    for known in available_models():
        assert known in message


def test_unknown_model_near_miss_suggests() -> None:
    message = config_error("smollm2-135m-instruc")
    assert "did you mean 'smollm2-135m-instruct'" in message


def test_missing_params_file(tmp_path) -> None:
    message = config_error(tmp_path / "absent.yaml")
    assert "absent.yaml" in message


@pytest.mark.parametrize("q", [0.0, 0.5, 0.7, -0.1])
def test_quantile_out_of_range(tmp_path, q) -> None:
    message = config_error(write(tmp_path, GOOD.replace("gender_lang: 0.2", f"gender_lang: {q}")))
    assert "quantile" in message and "gender_lang" in message


@pytest.mark.parametrize(
    ("old", "new", "key"), [("tau: 0.1", "tau: 1.0", "tau"), ("batch_tokens: 512", "batch_tokens: 10", "batch_tokens")]
)
def test_range_checks(tmp_path, old, new, key) -> None:
    message = config_error(write(tmp_path, GOOD.replace(old, new)))
    assert key in message


def test_remote_needs_hf(tmp_path) -> None:
    text = GOOD.replace("  hf: some/model", "  path: /tmp/x\n  remote: true")
    assert "remote" in config_error(write(tmp_path, text))


@pytest.mark.parametrize(
    ("old", "new", "suggestion"),
    [("gender_lang: 0.2", "gender_lng: 0.2", "gender_lang"),
     ("gendered_language: 100", "gendered_lang: 100", "gendered_language")],
)
def test_unknown_vector_or_dataset_name_suggests(tmp_path, old, new, suggestion) -> None:
    message = config_error(write(tmp_path, GOOD.replace(old, new)))
    assert f"did you mean '{suggestion}'" in message


def test_size_zero_skips_a_task_and_its_verdict_tests(tmp_path) -> None:
    text = GOOD + "chapters: [decision_tasks, validity]\n" + SIZES.replace("credit: 2", "credit: 0")
    params = load_params(write(tmp_path, text))
    assert not params.tasks.run("credit") and params.tasks.run("medical_race") and params.tasks.run("judicial_penalty")
    declared = [test.name for test in verdict_tests(params)]
    assert not any(name.startswith("credit.") for name in declared)  # nor validity's names test, which needs credit
    assert "medical_race.blackbox_explicit" in declared and "medical_race.blackbox_implicit" not in declared
    assert not any(".slope" in name and "whitebox" not in name for name in declared)  # robustness not listed
    message = config_error(write(tmp_path, GOOD + "tasks:\n  sizes: {credit: 1}\n"))
    assert "tasks:sizes:credit" in message and "0 to skip" in message


@pytest.mark.parametrize("chapter", ["decision_tasks", "robustness", "validity"])
def test_a_task_left_out_of_the_sizes_draws_its_own_default(tmp_path, chapter) -> None:
    """A task the params do not size draws its task's default (`Task.size`, the paper's), so a new task needs no
    params edit; the sizes a params file gives stay as given."""
    text = GOOD + f"chapters: [{chapter}]\n"
    sized = load_params(write(tmp_path, text + SIZES.replace("judicial_conviction: 2, ", ""))).tasks.sizes
    assert sized == {**dict.fromkeys(TASKS, 2), "judicial_conviction": 500}
    assert load_params(write(tmp_path, text)).tasks.sizes == {name: task.size for name, task in TASKS.items()}
    shipped = load_params("llama-3.1-8b-instruct").tasks.sizes  # the paper profile: each task at the paper's size
    assert shipped == {name: task.size for name, task in TASKS.items()}


def test_settings_are_printed_from_the_params(tmp_path) -> None:
    """The settings print as the params give them, each line wrapped to fit the book's column (at most PRINTED
    columns, continuation lines indented), so that no printed line runs past it."""
    params = load_params(write(tmp_path, GOOD + "chapters: [robustness]\n" + SIZES))
    text = Chapter("robustness", params, tmp_path, params_file="p.yaml").describe()
    lines = text.splitlines()
    assert lines[0] == "tiny (params: p.yaml), seed 3, batch_tokens 512"
    assert lines[1].startswith("tasks: sizes={'judicial_conviction': 2,")  # the section robustness reads
    assert "lambdas=[-1.0, -0.8," in " ".join(text.split())
    assert len(lines) > 2 and all(len(line) <= PRINTED for line in lines)
    assert all(line.startswith("    ") for line in lines[2:])
