"""The endpoint engine against a real `transformers serve` (started here over the tiny test model): its probe finds
no log-probabilities (sampled mode), seeded answers come back as the model's tokens, a second audit over the same
report folder asks nothing twice, a scored pass is refused in one line while the decision tasks read their black-box
metric as shares of sampled answers, and the API key is in no file written."""

from __future__ import annotations

import json
import math
import shutil

import pytest
import torch

from conftest import WORDS
from llmaudit.capabilities import NO_WEIGHTS
from llmaudit.chapters.decision_tasks import TASKS
from llmaudit.chapters.decision_tasks.base import TaskItem
from llmaudit.chapters.decision_tasks.estimates import estimates
from llmaudit.chapters.decision_tasks.evaluate import TaskAudit, TaskRunner
from llmaudit.chapters.decision_tasks.reading import answer_of
from llmaudit.errors import AuditError
from llmaudit.models import load_model
from llmaudit.models.ask import ask
from llmaudit.models.endpoint.chat import INSTRUCTION, Chat, turns
from llmaudit.models.endpoint.ledger import FOLDER
from llmaudit.models.endpoint.modes import Mode
from llmaudit.models.loading.spec import ModelSpec
from llmaudit.models.request import Request, SampleCall, SampleRequest
from servers import transformers_serve

KEY = "sk-test-6f1d0c2e9b7a4d3c"  # what a real key looks like; the test scans every written file for it


@pytest.fixture(scope="module")
def served_dir(tiny_model_dir, tmp_path_factory):
    """The tiny model whose generation config samples: `transformers serve` takes `do_sample` from it alone (a
    request's temperature and seed do not turn sampling on), so a greedy model's sampled answers are all alike."""
    folder = tmp_path_factory.mktemp("sampling") / "tiny"
    shutil.copytree(tiny_model_dir, folder)
    (folder / "generation_config.json").write_text(json.dumps({"do_sample": True}))
    return folder


@pytest.fixture(scope="module")
def server(served_dir, tmp_path_factory):
    with transformers_serve(served_dir, tmp_path_factory.mktemp("serve") / "serve.log") as url:
        yield url


def _model(url, folder, served_dir, monkeypatch, max_samples=100):
    """The tiny model behind the server, its request ledger in `folder`, its key in an environment variable."""
    monkeypatch.setenv("TEST_ENDPOINT_KEY", KEY)
    spec = ModelSpec(path=str(served_dir), endpoint=url, served=str(served_dir),
                     api_key_env="TEST_ENDPOINT_KEY", timeout=30, retries=1, max_samples=max_samples)
    model = load_model("tiny", spec)
    model.requests.path = folder / FOLDER / "sampling.jsonl"
    return model


REQUEST = SampleRequest(calls=[SampleCall(texts=["<|user|> who is the doctor <eos> <|assistant|> "], per_text=3,
                                          seed=11)], max_new_tokens=4, temperature=1.0)


def test_sampled_mode_resumes_without_asking_twice(server, served_dir, tmp_path, monkeypatch):
    first = _model(server, tmp_path, served_dir, monkeypatch)
    assert first.engine.mode == Mode.SAMPLED  # transformers serve returns no log-probabilities
    drawn = ask(first, REQUEST)
    assert drawn.tokens[0].shape == (3, 4)
    assert (drawn.tokens[0] >= 0).sum() > 0  # answers came back as the tiny tokenizer's ids
    assert first.requests.asked == 3
    again = _model(server, tmp_path, served_dir, monkeypatch)  # a killed audit restarted on the same folder
    resumed = ask(again, REQUEST)
    assert again.requests.asked == 0 and again.requests.reused == 3
    assert torch.equal(resumed.tokens[0], drawn.tokens[0])
    for path in tmp_path.rglob("*"):
        assert not path.is_file() or KEY not in path.read_text(errors="replace"), path


def test_scored_pass_refused_in_sampled_mode(server, served_dir, tmp_path, monkeypatch):
    model = _model(server, tmp_path, served_dir, monkeypatch)
    with pytest.raises(AuditError, match="endpoint engine cannot give"):
        ask(model, Request(texts=["<|user|> yes or no <eos> <|assistant|> "], labels=[0, 1], desc="probe"))


ANSWERS = tuple(WORDS)  # many answer words, so that the untrained tiny model names one often enough


def test_decision_tasks_black_box_read_as_shares_of_sampled_answers(server, served_dir, tmp_path, monkeypatch):
    items = [TaskItem(f"{group} {word} good or bad", "", group, str(case), case) for case, word in
             enumerate(("nurse", "doctor", "teacher", "engineer")) for group in ("female", "male")]
    model = _model(server, tmp_path, served_dir, monkeypatch, max_samples=6)
    frame = TaskRunner(model, 3).score(items, ANSWERS, "credit explicit")
    assert frame["samples"].tolist() == [6] * 8  # the margin asks 4,802 per prompt of 4 cases: capped at 6
    assert model.requests.asked == 8 * 6
    exchanges = [json.loads(line) for line in model.requests.path.read_text().splitlines()]
    texts: set[str] = set()
    for item, row in zip(items, frame.itertuples()):  # each share is the ledger's answers parsed by the rule
        given = [answer_of(e["response"]["choices"][0]["text"], ANSWERS) for e in exchanges
                 if e["body"]["prompt"] == row.prompt]
        named = [answer for answer in given if answer is not None]
        assert len(given) == 6 and row.mass == pytest.approx(len(named) / 6)
        texts.update(e["response"]["choices"][0]["text"] for e in exchanges if e["body"]["prompt"] == row.prompt)
        if named:
            assert row.metric == pytest.approx(named.count(item.target) / len(named))
            assert row.lo <= row.metric <= row.hi
        else:
            assert math.isnan(row.metric)
    assert frame["mass"].sum() > 0 and len(texts) > 8  # some answers named an answer word; answers vary by seed
    again = _model(server, tmp_path, served_dir, monkeypatch, max_samples=6)
    assert TaskRunner(again, 3).score(items, ANSWERS, "credit explicit").equals(frame) and again.requests.asked == 0
    audit = TaskAudit(TASKS["credit"], None, {"explicit": frame.assign(fact=float("nan"))}, None)
    results = estimates({"credit": audit}, 200, 0).results
    gap = results.loc["credit.blackbox_explicit"]
    if gap["value"] is None:  # under two cases' answers named an answer word in both groups
        assert gap["note"] == ("not measurable: fewer than two cases whose sampled answers named an answer word in "
                               "both groups")
    else:
        assert gap["lo"] <= gap["value"] <= gap["hi"] and gap["n"] >= 1


def test_an_unsteered_credit_audit_runs_in_sampled_mode(server, served_dir, mirror, tmp_path, monkeypatch):
    model = _model(server, tmp_path, served_dir, monkeypatch, max_samples=5)
    audit = TaskRunner(model, 0, mirror).audit(TASKS["credit"], None, [0.0], 2, dependence=True)
    assert set(audit.black) == {"explicit", "implicit"} and audit.dependence is not None
    assert all(frame["samples"].eq(5).all() for frame in [*audit.black.values(), audit.dependence.black])
    results = estimates({"credit": audit}, 200, 0).results
    assert results.at["credit.whitebox_slope", "note"] == NO_WEIGHTS
    for test in ("credit.blackbox_explicit", "credit.blackbox_implicit"):
        value, note = results.at[test, "value"], results.at[test, "note"]
        assert (value is None and note.startswith("not measurable: fewer than two cases")) or (
            results.at[test, "lo"] <= value <= results.at[test, "hi"])


def test_chat_route_samples_through_the_server_s_template_with_no_tokenizer(server, served_dir, tmp_path,
                                                                             monkeypatch):
    monkeypatch.setenv("TEST_ENDPOINT_KEY", KEY)
    spec = ModelSpec(endpoint=server, served=str(served_dir), route="chat", api_key_env="TEST_ENDPOINT_KEY",
                     timeout=30, retries=1, max_samples=5)

    def model():
        loaded = load_model("tiny", spec)  # no tokenizer source: spellings stand in
        loaded.requests.path = tmp_path / FOLDER / "chat.jsonl"
        return loaded

    items = [TaskItem(f"{group} {word} good or bad", "Answer:", group, str(case), case) for case, word in
             enumerate(("nurse", "doctor")) for group in ("female", "male")]
    first = model()
    assert first.engine.mode == Mode.SAMPLED and first.provenance["route"] == "chat"  # the chat route ignores logprobs
    frame = TaskRunner(first, 3).score(items, ANSWERS, "credit explicit")
    exchanges = [json.loads(line) for line in first.requests.path.read_text().splitlines()]
    assert len(exchanges) == 4 * 5 and {e["route"] for e in exchanges} == {"chat"}
    for item, row in zip(items, frame.itertuples()):  # the turns sent, and each share parsed from the replies
        mine = [e for e in exchanges if e["body"]["messages"] == turns(row.prompt)[0]]
        assert [m["content"] for m in mine[0]["body"]["messages"]] == [
            f"{item.prompt}\n\n{INSTRUCTION.format(prefix='Answer:')}"] and "prompt" not in mine[0]["body"]
        given = [answer_of(Chat.answer(e["response"], row.prompt), ANSWERS) for e in mine]
        named = [answer for answer in given if answer is not None]
        assert len(mine) == 5 and row.mass == pytest.approx(len(named) / 5)
        if named:
            assert row.metric == pytest.approx(named.count(item.target) / len(named))
        else:
            assert math.isnan(row.metric)
    again = model()
    assert TaskRunner(again, 3).score(items, ANSWERS, "credit explicit").equals(frame) and again.requests.asked == 0
    for path in tmp_path.rglob("*"):
        assert not path.is_file() or KEY not in path.read_text(errors="replace"), path
