"""`llmaudit audit --endpoint URL --model NAME`: the params it builds (the tokenizer's source, the endpoint, the
model's name there, the key's variable, never the key; every chapter of the profile; the report folder named
after the model and the host) and bad input as one line with exit status 2."""

from __future__ import annotations

import pytest

from llmaudit.cli import main
from llmaudit.config import Params
from llmaudit.runner.adhoc import Served, built_params


def test_endpoint_params(tiny_model_dir, monkeypatch):
    monkeypatch.setenv("SOME_KEY", "sk-never-written")
    served = Served("http://10.0.0.7:8000", "SOME_KEY", str(tiny_model_dir))
    raw = built_params("org/served-model", profile="ci", served=served)
    assert raw["name"] == "org__served-model-at-10.0.0.7-8000"
    assert "chapters" not in raw  # the profile's, every chapter: each runs what the endpoint allows (runner.needs)
    assert raw["model"] == {"path": str(tiny_model_dir.resolve()), "endpoint": "http://10.0.0.7:8000",
                            "served": "org/served-model", "route": "completions", "api_key_env": "SOME_KEY"}
    assert "sk-never-written" not in str(raw)
    Params.model_validate(raw)  # a valid params file


def test_chat_route_params_need_no_tokenizer():
    raw = built_params("gpt-4o-mini", profile="ci", served=Served("https://api.example.com", "K", route="chat"))
    assert raw["model"] == {"endpoint": "https://api.example.com", "served": "gpt-4o-mini", "route": "chat",
                            "api_key_env": "K"}  # no source: the server's template, spellings for the words
    assert Params.model_validate(raw).model.route == "chat"
    with pytest.raises(ValueError, match="exactly one of"):  # the completions route renders with a tokenizer
        Params.model_validate({**raw, "model": {**raw["model"], "route": "completions"}})


@pytest.mark.parametrize("argv, says", [
    (["audit", "--model", "org/m", "--endpoint", "localhost:8000"], "give the server's http:// or https:// address"),
    (["audit", "--model", "org/m", "--api-key-env", "K"], "go with --endpoint URL"),
    (["audit", "--model", "org/m", "--route", "chat"], "go with --endpoint URL"),
    (["audit", "ci", "--endpoint", "http://localhost:8000"], "go with --model"),
])
def test_bad_endpoint_input_is_one_line(argv, says, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert says in err and err.count("\n") == 1
