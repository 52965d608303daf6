"""The GPU check (benchmarks/gpu_check.py) at the tiny stand-in shape on the CPU, one prompt a set: every engine runs
on the chapters' real prompts and the JSON holds the rates, the FLOP/s share, the planned batch and the time outside
the blocks, so that the script cannot rot between the rare calls on a GPU."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("gpu_check", ROOT / "benchmarks" / "gpu_check.py")
gpu_check = sys.modules["gpu_check"] = importlib.util.module_from_spec(spec)
spec.loader.exec_module(gpu_check)


def test_the_gpu_check_runs_every_engine_at_a_toy_shape(tmp_path, mirror, monkeypatch) -> None:
    monkeypatch.setenv("LLMAUDIT_DATA", str(mirror))
    out = tmp_path / "check.json"
    gpu_check.main([str(out), "--shape", "tiny", "--device", "cpu", "--slice", "1", "--profile"])
    result = json.loads(out.read_text(encoding="utf-8"))
    assert set(result["engines"]) == set(result["top_operations"]) == {"prefix", "sweep", "derivative", "sample",
                                                                       "sample@markedness"}
    assert result["matmul_flop_per_s"] > 0 and result["batch_tokens_planned"] > 0
    assert result["tree_agreement_max_abs"] < 1e-5  # float32: the packed token trees compute the plain forward
    assert result["masked_attention"].startswith("chunked SDPA")  # a CPU has no fused kernel
    assert result["sampler_agreement"] == 1.0  # float32: the batched sampler draws generate's tokens
    for operations in result["top_operations"].values():
        assert operations and all(op["seconds"] >= 0 and op["calls"] > 0 for op in operations)
    for numbers in result["engines"].values():
        assert numbers["token_blocks"] > 0 and numbers["token_blocks_per_s"] > 0 and numbers["flop_per_s"] > 0
        assert 0 <= numbers["outside_blocks_share"] <= 1
        assert numbers["tokens_per_s"] * 4 == pytest.approx(numbers["token_blocks_per_s"], rel=1e-3)  # 4 blocks


def test_the_sampler_agreement_check_runs_at_a_toy_shape(tmp_path, mirror, monkeypatch) -> None:
    spec = importlib.util.spec_from_file_location("sampler_agreement", ROOT / "benchmarks" / "sampler_agreement.py")
    agreement = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(agreement)
    monkeypatch.setenv("LLMAUDIT_DATA", str(mirror))
    result = agreement.main([str(tmp_path / "agreement.json"), "--device", "cpu", "--runs", "tiny:float32"])
    assert result["draw_equals_multinomial"] == 1.0
    found = result["sampler_against_generate"]["tiny:float32"]
    assert found["equal_share"] == 1.0 and {step for call in found["first_differing_step"] for step in call} == {50}
