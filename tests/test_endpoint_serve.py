"""The endpoint engine against a real `transformers serve` (started here over the tiny test model): its probe finds
no log-probabilities (sampled mode), seeded answers come back as the model's tokens, a second audit over the same
report folder asks nothing twice, a scored pass is refused in one line, and the API key is in no file written."""

from __future__ import annotations

import pytest
import torch

from llmaudit.errors import AuditError
from llmaudit.models import load_model
from llmaudit.models.ask import ask
from llmaudit.models.endpoint.ledger import FOLDER
from llmaudit.models.endpoint.modes import Mode
from llmaudit.models.loading.spec import ModelSpec
from llmaudit.models.request import Request, SampleCall, SampleRequest
from servers import transformers_serve

KEY = "sk-test-6f1d0c2e9b7a4d3c"  # what a real key looks like; the test scans every written file for it


@pytest.fixture(scope="module")
def server(tiny_model_dir, tmp_path_factory):
    with transformers_serve(tiny_model_dir, tmp_path_factory.mktemp("serve") / "serve.log") as url:
        yield url


def _model(url, folder, tiny_model_dir, monkeypatch):
    """The tiny model behind the server, its request ledger in `folder`, its key in an environment variable."""
    monkeypatch.setenv("TEST_ENDPOINT_KEY", KEY)
    spec = ModelSpec(path=str(tiny_model_dir), endpoint=url, served=str(tiny_model_dir),
                     api_key_env="TEST_ENDPOINT_KEY", timeout=30, retries=1)
    model = load_model("tiny", spec)
    model.requests.path = folder / FOLDER / "sampling.jsonl"
    return model


REQUEST = SampleRequest(calls=[SampleCall(texts=["<|user|> who is the doctor <eos> <|assistant|> "], per_text=3,
                                          seed=11)], max_new_tokens=4, temperature=1.0)


def test_sampled_mode_resumes_without_asking_twice(server, tiny_model_dir, tmp_path, monkeypatch):
    first = _model(server, tmp_path, tiny_model_dir, monkeypatch)
    assert first.engine.mode == Mode.SAMPLED  # transformers serve returns no log-probabilities
    drawn = ask(first, REQUEST)
    assert drawn.tokens[0].shape == (3, 4)
    assert (drawn.tokens[0] >= 0).sum() > 0  # answers came back as the tiny tokenizer's ids
    assert first.requests.asked == 3
    again = _model(server, tmp_path, tiny_model_dir, monkeypatch)  # a killed audit restarted on the same folder
    resumed = ask(again, REQUEST)
    assert again.requests.asked == 0 and again.requests.reused == 3
    assert torch.equal(resumed.tokens[0], drawn.tokens[0])
    for path in tmp_path.rglob("*"):
        assert not path.is_file() or KEY not in path.read_text(errors="replace"), path


def test_scored_pass_refused_in_sampled_mode(server, tiny_model_dir, tmp_path, monkeypatch):
    model = _model(server, tmp_path, tiny_model_dir, monkeypatch)
    with pytest.raises(AuditError, match="endpoint engine cannot give"):
        ask(model, Request(texts=["<|user|> yes or no <eos> <|assistant|> "], labels=[0, 1], desc="probe"))
