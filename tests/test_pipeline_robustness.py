"""Robustness of the pipeline: one-line errors for inputs not covered elsewhere, caches keyed by the code,
identical numbers from two runs, and remote code only when a params file asks for it."""

from __future__ import annotations

import pytest
import torch

from llmaudit import cache
from llmaudit.chapters.decision_tasks.base import sample_ids
from llmaudit.chapters.decision_tasks.evaluate import TaskRunner
from llmaudit.config import PARAMS_DIR, load_params
from llmaudit.errors import AuditError, ConfigError
from llmaudit.models import load_model
from llmaudit.models.loading.spec import ModelSpec
from llmaudit.runner import chapter as chapter_module
from llmaudit.runner.chapter import Chapter
from test_task_runner import ToyTask, toy_vector


def test_out_of_memory_names_the_setting_to_lower(tiny_model, monkeypatch) -> None:
    def exhausted(*args, **kwargs):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB")

    monkeypatch.setattr(tiny_model.hf.model, "forward", exhausted)  # under every engine
    for traced in (False, True):
        message = r"^out of memory with batch_tokens=64 \(batches halved down to 64 tokens\): lower batch_tokens"
        with pytest.raises(AuditError, match=message) as info:
            tiny_model.forward(["the nurse"], [1], batch_tokens=64, traced=traced)
        assert "\n" not in str(info.value)


def test_cpu_allocation_failure_is_the_same_error(bind, tiny_model, monkeypatch) -> None:
    def exhausted(*args, **kwargs):
        raise RuntimeError("[enforce fail at alloc_cpu.cpp:117] DefaultCPUAllocator: can't allocate memory")

    monkeypatch.setattr(tiny_model.hf.model, "forward", exhausted)
    with pytest.raises(AuditError, match="lower batch_tokens"):
        toy_vector_sweep(bind(tiny_model, batch_tokens=64))


def toy_vector_sweep(model) -> None:
    from llmaudit.models.ask import ask
    from llmaudit.models.request import Edit, Request

    ask(model, Request(texts=[model.chat("the nurse")], labels=[1],
                       edit=Edit(vector=toy_vector(model), lambdas=[0.0, 1.0])))


def test_other_runtime_errors_pass_through(tiny_model, monkeypatch) -> None:
    def broken(*args, **kwargs):
        raise RuntimeError("shape mismatch")

    monkeypatch.setattr(tiny_model.hf.model, "forward", broken)
    for traced in (False, True):
        with pytest.raises(RuntimeError, match="shape mismatch"):
            tiny_model.forward(["the nurse"], [1], traced=traced)


def test_empty_task_after_filtering() -> None:
    with pytest.raises(AuditError, match="no cases left"):
        sample_ids([], 4, seed=0)


def test_task_size_below_two_is_a_config_error(tmp_path) -> None:
    text = (PARAMS_DIR / "ci.yaml").read_text().replace("credit: 4", "credit: 1")
    path = tmp_path / "small.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=r"tasks:sizes:credit: need at least 2 cases"):
        load_params(path)


@pytest.mark.parametrize("trust", [False, True])
def test_trust_remote_code_reaches_transformers_only_as_set(tiny_model_dir, monkeypatch, trust) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    seen = []
    for cls in (AutoModelForCausalLM, AutoTokenizer):
        real = cls.from_pretrained.__func__

        def spy(klass, *args, _real=real, **kwargs):
            seen.append(kwargs.get("trust_remote_code"))
            return _real(klass, *args, **kwargs)

        monkeypatch.setattr(cls, "from_pretrained", classmethod(spy))
    load_model("tiny", ModelSpec(path=str(tiny_model_dir), trust_remote_code=trust))
    assert seen == [trust, trust]


def test_changed_code_never_reuses_cached_results(tmp_path, monkeypatch) -> None:
    calls = []

    def compute():
        calls.append(1)
        return {"x": torch.ones(2)}

    def run():
        chapter = Chapter("steering_vectors", load_params("ci"), tmp_path)
        cache.cached_tensors(chapter.cache, {"prompts": ["a"]}, compute)

    run()
    run()
    assert len(calls) == 1
    monkeypatch.setattr(chapter_module, "code_version", lambda packages: "edited")
    run()
    assert len(calls) == 2


def test_code_version_follows_the_computing_modules(tmp_path) -> None:
    packages = ("models", "chapters.steering_vectors")
    version = cache.code_version(packages)
    assert len(version) == 16 and version == cache.code_version(("chapters.steering_vectors", "models"))
    assert version != cache.code_version(("models", "chapters.steering_vectors", "chapters.decision_tasks"))


def test_two_runs_give_identical_numbers(bind, tiny_model) -> None:
    def run():
        runner = TaskRunner(bind(tiny_model, batch_tokens=64), seed=0)
        audit = runner.audit(ToyTask(), toy_vector(tiny_model), [-1.0, 0.0, 1.0], n=4)
        return audit.black["implicit"], audit.white, audit.slope(200, 0), audit.gap("explicit", 200, 0)

    first, second = run(), run()
    assert first[0].equals(second[0]) and first[1].equals(second[1])
    assert first[2] == second[2] and first[3] == second[3]
