"""The projection of the paper-size audit's time on a GPU (benchmarks/projection.py) on a recorded stand-in ledger
(tests/recorded/scale-ledger: 4 blocks) and a GPU check's rates: token-blocks scale by 32 / 4, each engine's take its
rate, an engine the check did not time the slowest rate."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from llmaudit.ledger import read_calls, read_ledgers

ROOT = Path(__file__).resolve().parent.parent
RECORDED = ROOT / "tests" / "recorded" / "scale-ledger"
spec = importlib.util.spec_from_file_location("projection", ROOT / "benchmarks" / "projection.py")
projection = sys.modules["projection"] = importlib.util.module_from_spec(spec)
spec.loader.exec_module(projection)
RATES = {"prefix": 1e6, "sweep": 5e5, "derivative": 2e5, "sample": 2.5e5}


def test_each_chapter_s_token_blocks_scale_to_32_blocks_and_divide_by_their_engine_s_rate() -> None:
    calls, totals = read_calls(RECORDED), read_ledgers(RECORDED)
    got = {p.chapter: p for p in projection.project(calls, {c: t["blocks"] for c, t in totals.items()}, RATES)}
    framing = got["framing"]
    assert framing.token_blocks == {"sample": 8e6, "prefix": 2.4e6, "sweep": 8e5}
    assert framing.seconds == pytest.approx({"sample": 32.0, "prefix": 2.4, "sweep": 1.6})
    steering = got["steering_vectors"]  # "traced" was not timed: the slowest engine's rate (the derivative's)
    assert steering.seconds == pytest.approx({"prefix": 16.0, "sweep": 6.4, "traced": 8.0})
    assert framing.total + steering.total == pytest.approx(66.4)
    own = projection.project(calls, {c: t["blocks"] for c, t in totals.items()}, RATES | {"sample@framing": 1e6})
    seconds = {p.chapter: p.seconds.get("sample") for p in own}
    assert seconds == {"framing": pytest.approx(8.0), "steering_vectors": None}
    half = projection.project(calls, {c: t["blocks"] for c, t in totals.items()}, RATES, target_blocks=2)
    assert sum(p.total for p in half) == pytest.approx(66.4 / 16)


def test_the_command_prints_the_projection_and_says_what_to_fix(tmp_path, capsys) -> None:
    check = tmp_path / "check.json"
    check.write_text(json.dumps({"device": "NVIDIA H100 80GB HBM3", "engines": {
        e: {"token_blocks_per_s": r} for e, r in RATES.items()}}), encoding="utf-8")
    assert projection.main([str(RECORDED), str(check)]) == 0
    out = capsys.readouterr().out
    assert "NVIDIA H100" in out and "66.4" in out and "framing" in out
    check.write_text(json.dumps({"engines": {"prefix": {"token_blocks_per_s": 0}}}), encoding="utf-8")
    assert projection.main([str(RECORDED), str(check)]) == 2
    assert "give the JSON" in capsys.readouterr().err
    assert projection.main([str(tmp_path), str(check)]) == 2
    assert "run the scale test" in capsys.readouterr().err


def test_a_plan_projects_as_the_ledgers_it_holds(tmp_path, capsys) -> None:
    """`llmaudit audit --dry-run`'s plan (NAME.plan.json: per chapter its totals and calls) reads as the same ledgers
    in a report folder do."""
    calls, totals = read_calls(RECORDED), read_ledgers(RECORDED)
    plan = tmp_path / "model.plan.json"
    plan.write_text(json.dumps({"chapters": {c: totals[c] | {"calls": calls[c]} for c in calls}}), encoding="utf-8")
    assert projection.read_source(plan) == (calls, {c: totals[c] for c in calls})
    check = tmp_path / "check.json"
    check.write_text(json.dumps({"engines": {e: {"token_blocks_per_s": r} for e, r in RATES.items()}}),
                     encoding="utf-8")
    assert projection.main([str(plan), str(check)]) == 0
    assert "66.4" in capsys.readouterr().out
    plan.write_text("{}", encoding="utf-8")
    assert projection.main([str(plan), str(check)]) == 2
    assert "llmaudit audit --dry-run" in capsys.readouterr().err
