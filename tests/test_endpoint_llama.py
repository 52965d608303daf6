"""The default model's black-box decision rows through llama-cpp-python's OpenAI-compatible server (started here over
the packaged GGUF) against the local engine: the same prompts, the answer words read from the server's top-k
log-probabilities. Over the float32 copy of the GGUF (`embedded.float32_gguf`: the local engine's own weights) the
rows agree within float32's rounding of the server's top-20 log-probabilities; over the packaged Q4_1 file llama.cpp
multiplies the weights with 8-bit activations, another function of the input, so they agree within a wider tolerance,
measured (TOLERANCE; make test-endpoints; deselected by default)."""

from __future__ import annotations

import json

import pytest

from llmaudit.chapters.decision_tasks import TASKS
from llmaudit.chapters.decision_tasks.evaluate import TaskRunner
from llmaudit.models import load_model
from llmaudit.models.endpoint.modes import Mode
from llmaudit.models.loading.embedded import float32_gguf, locate_gguf
from llmaudit.models.loading.spec import ModelSpec
from llmaudit.models.loading.standin import DEFAULT_GGUF
from servers import llama_cpp_server

pytestmark = pytest.mark.llama_server
# of a case's metric, a probability, by the file served: measured largest 0.0023 over the float32 copy and 0.076 over
# the Q4_1 file (judicial_conviction, 4 cases, 2026-11-28)
TOLERANCE = {"float32": 0.01, "q4_1": 0.1}


@pytest.fixture(scope="module", params=list(TOLERANCE))
def served(request, tmp_path_factory):
    gguf = locate_gguf(DEFAULT_GGUF)
    with llama_cpp_server(float32_gguf(gguf) if request.param == "float32" else gguf,
                          tmp_path_factory.mktemp("llama") / "server.log") as url:
        yield request.param, url


@pytest.mark.parametrize("task", ["credit", "admissions_gender", "judicial_conviction"])
def test_black_box_rows_agree_with_the_local_engine(served, mirror, task, tmp_path):
    weights, served = served
    local = load_model("smollm2", ModelSpec(embedded=DEFAULT_GGUF))
    remote = load_model("smollm2", ModelSpec(embedded=DEFAULT_GGUF, endpoint=served, served="smollm2"))
    remote.requests.path = tmp_path / "requests" / "decision_tasks.jsonl"
    assert not remote.engine.steers
    rows = {name: TaskRunner(model, 0, mirror).black_box(TASKS[task], "explicit", 4)
            for name, model in (("local", local), ("endpoint", remote))}
    assert list(rows["local"]["prompt"]) == list(rows["endpoint"]["prompt"])
    difference = (rows["local"]["metric"] - rows["endpoint"]["metric"]).abs().max()
    mass = (rows["local"]["mass"] - rows["endpoint"]["mass"]).abs().max()
    print(f"{task}: mode {remote.engine.mode}, largest metric difference {difference:.4f}, mass {mass:.4f} over "
          f"{len(rows['local'])} prompts")
    assert remote.engine.mode == Mode.EXACT  # every answer word in the server's window of 20
    assert difference < TOLERANCE[weights]


def test_chat_route_reads_answer_words_from_the_server_s_chat_window(served, mirror, tmp_path):
    """llama-cpp-python's chat route returns `top_logprobs`: the answer word is read there with no tokenizer, after
    the GGUF's own chat template, and each read's coverage and mass are reported (the model answers a question told
    to begin with the prefix, not from it, so the rows are not the local engine's)."""
    remote = load_model("smollm2", ModelSpec(endpoint=served[1], served="smollm2", route="chat"))
    remote.requests.path = tmp_path / "requests" / "decision_tasks.jsonl"
    assert remote.engine.mode == Mode.EXACT and remote.provenance["tokenizer"] is None
    rows = TaskRunner(remote, 0, mirror).black_box(TASKS["credit"], "explicit", 4)
    print(f"chat route: mode {remote.engine.mode}, coverage {rows['coverage'].min():.3f} to "
          f"{rows['coverage'].max():.3f}, mass {rows['mass'].min():.3f} to {rows['mass'].max():.3f}")
    exchanges = [json.loads(line) for line in remote.requests.path.read_text().splitlines()]
    assert {e["route"] for e in exchanges} == {"chat"} and all(e["body"]["top_logprobs"] == 20 for e in exchanges)
    assert (rows["mass"] > 0).all()  # an answer word spelled in the window of every prompt
