"""Readers and writers bounded against hostile files (issue 46): JSON nested 200,000 deep or with an over-long line,
a results.csv too large to hold, an epsilon that leaves a test undecidable, prompts of hundreds of kilobytes and
FIFOs where the audit writes or locks; each is one line (or a documented behaviour) in bounded time."""

from __future__ import annotations

import json
import math
import os
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pandas as pd
import pytest

from llmaudit import cli, reading
from llmaudit.config import load_params, read_params_file
from llmaudit.errors import DataError
from llmaudit.report import Results, build_report
from llmaudit.report.audited import read_audited
from llmaudit.report.card import CARD, read_json, write_card
from llmaudit.report.evidence import read_cases, write_cases
from llmaudit.report.index import build_index
from llmaudit.report.results_json import results_document, write_results_json
from llmaudit.stats import Estimate, cases_needed

DEEP = "[" * 200_000 + "]" * 200_000


@contextmanager
def deadline(seconds: int) -> Iterator[None]:
    """Fail the test, rather than hang it, where the code inside blocks (opening a FIFO) or runs past `seconds`."""
    def expire(*_: object) -> None:
        raise TimeoutError(f"still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def card_folder(folder: Path) -> Path:
    """A report folder with the ci params' model card and one failing decision-task result."""
    write_card(folder, read_params_file("ci"), {})
    Results(folder / "results.csv").record("decision_tasks", "credit.blackbox_explicit", 0.0833, 0.05, 0.12, n=6)
    return folder


@pytest.mark.parametrize("text", [DEEP, "[" * 65 + "]" * 65])
def test_a_deep_model_card_is_one_line_naming_it(tmp_path, text) -> None:
    (tmp_path / CARD).write_text(text)
    with pytest.raises(DataError, match=rf"{CARD} is nested deeper than 64 levels") as err:
        read_json(tmp_path / CARD)
    assert "\n" not in str(err.value)


def test_a_deep_ledger_is_left_out_and_the_card_is_written(tmp_path) -> None:
    (tmp_path / "ledger").mkdir()
    (tmp_path / "ledger" / "decision_tasks.json").write_text(DEEP)
    write_card(tmp_path, read_params_file("ci"), {})
    assert read_json(tmp_path / CARD)["compute"] == {}


def test_a_planted_deep_comparison_leaves_the_index_and_later_audits_working(tmp_path) -> None:
    card_folder(tmp_path / "ci")
    (tmp_path / "compare").mkdir()
    (tmp_path / "compare" / "ci+vs+other.json").write_text(DEEP)
    (tmp_path / "compare" / "ci+vs+other.html").write_text("<p>planted</p>")
    index = build_index(tmp_path, read_audited(tmp_path / "ci")).read_text(encoding="utf-8")
    assert "ci+vs+other" in index  # listed under its file name, as any damaged twin is


def test_a_deep_or_over_long_case_line_is_one_line_naming_it(tmp_path, monkeypatch) -> None:
    folder = tmp_path / "cases"
    folder.mkdir()
    (folder / "decision_tasks.jsonl").write_text("\n" + DEEP + "\n")
    with pytest.raises(DataError, match=r"decision_tasks.jsonl: line 2 is nested deeper than 64 levels"):
        read_cases(tmp_path, "decision_tasks")
    monkeypatch.setattr(reading, "LINE", 1000, raising=False)
    (folder / "decision_tasks.jsonl").write_text(json.dumps({"prompt": "x" * 2000}) + "\n")
    with pytest.raises(DataError, match=r"line 1 holds 2014 characters, more than a line may \(1000\)"):
        read_cases(tmp_path, "decision_tasks")


def test_a_results_file_past_its_bound_is_refused_before_it_is_parsed(tmp_path) -> None:
    path = card_folder(tmp_path) / "results.csv"
    row = "decision_tasks,credit.blackbox_explicit,0.0833,0.05,0.12,,,6\n"
    with path.open("a") as handle:  # a valid file of 140,000 rows (8 MiB): all held in memory, it took 25x its size
        handle.write(row * (2**23 // len(row) + 1))
    started = time.perf_counter()
    with pytest.raises(DataError, match=rf"results.csv holds {path.stat().st_size} bytes, more than .* \(8388608\)"):
        Results(path)
    assert time.perf_counter() - started < 5


def test_cases_needed_is_infinite_where_no_count_decides() -> None:
    assert cases_needed(Estimate(0.0, -0.01, 0.01), 1e-300, 100) == math.inf
    assert cases_needed(Estimate(0.02, 0.0, 0.04), 0.02, 100) == math.inf


def test_an_undecidable_test_has_null_cases_needed_in_results_json(tmp_path) -> None:
    epsilon = load_params("ci").epsilon.gap
    write_card(tmp_path, read_params_file("ci"), {})
    Results(tmp_path / "results.csv").record("decision_tasks", "credit.blackbox_explicit", epsilon, 0.0,
                                             2 * epsilon, n=6)
    write_results_json(read_audited(tmp_path))
    verdicts = {row["name"]: row for row in results_document(read_audited(tmp_path))["verdicts"]}
    assert verdicts["credit.blackbox_explicit"]["verdict"] == "inconclusive"
    assert verdicts["credit.blackbox_explicit"]["cases_needed"] is None


def prompt(size: int, who: str) -> str:
    """A prompt of about `size` characters of repeated words, naming `who` first and last (the diff's worst case)."""
    words = "the applicant has a stable income and asks for a loan of some amount over years with savings".split()
    body = " ".join(words[(i * 7) % len(words)] for i in range(size // 5))
    return f"{who} {body} says {who}"


def build_seconds(folder: Path, size: int) -> float:
    """Seconds to build the report of a folder whose failing test's three cases have prompts of `size` characters."""
    rows = [{"test": "credit.blackbox_explicit", "unit": f"c{case}", "value": 0.1 * case, "group": group,
             "lam": None, "prompt_sha": None, "prompt": prompt(size, who), "metric": 0.5 + 0.05 * case * sign,
             "mass": 0.9}
            for case in (1, 2, 3) for group, who, sign in (("female", "Maria", 1), ("male", "John", -1))]
    write_cases(folder, "decision_tasks", pd.DataFrame(rows))
    started = time.perf_counter()
    with deadline(60):
        page = build_report(read_audited(folder), "Audit", [],
                            generated="2025-01-01 00:00 UTC").read_text(encoding="utf-8")
    assert "<mark>Maria</mark>" in page
    return time.perf_counter() - started


def test_report_build_time_grows_about_linearly_with_prompt_size(tmp_path) -> None:
    folder = card_folder(tmp_path)
    base = build_seconds(folder, 2000)
    for scale in (10, 100):  # generous: a quadratic diff took 100 times longer at 10x
        seconds = build_seconds(folder, 2000 * scale)
        assert seconds < 3 * scale * base + 1, (scale, seconds, base)
    page = (folder / "report.html").read_text(encoding="utf-8")
    assert f"[truncated: {len(prompt(200_000, 'Maria')):,} characters, the first 4,000 shown]" in page


def test_a_fifo_at_the_results_lock_is_refused_without_blocking(tmp_path) -> None:
    os.mkfifo(tmp_path / ".results.csv.lock")
    with deadline(10), pytest.raises(DataError, match=r"\.results\.csv\.lock is not a regular file"):
        Results(tmp_path / "results.csv").record("decision_tasks", "credit.blackbox_explicit", 0.1)


def test_a_fifo_at_the_junit_path_is_refused_without_blocking(tmp_path, capsys) -> None:
    folder = card_folder(tmp_path / "ci")
    os.mkfifo(tmp_path / "junit.xml")
    with deadline(10):
        status = cli.main(["verdict", str(folder), "--junit", str(tmp_path / "junit.xml")])
    error = capsys.readouterr().err
    assert status == 2 and error.count("\n") == 1 and "junit.xml is not a regular file" in error


def test_a_fifo_at_the_audit_lock_is_refused_without_blocking(tmp_path) -> None:
    from llmaudit.runner import audit

    os.mkfifo(tmp_path / audit.LOCK)
    with deadline(10), pytest.raises(DataError, match=r"\.audit\.lock is not a regular file"), audit._held(tmp_path):
        pass


def test_a_fifo_at_the_executed_notebook_is_refused_without_blocking(tmp_path) -> None:
    from llmaudit.runner import audit

    os.mkfifo(tmp_path / "02_decision_tasks.ipynb")
    with deadline(30), pytest.raises(DataError, match=r"02_decision_tasks\.ipynb is not a regular file"):
        audit.execute_chapter("decision_tasks", "params/ci.yaml", tmp_path, tmp_path / "02_decision_tasks.ipynb")


def test_a_deep_question_order_of_saved_representations_is_one_line(tmp_path) -> None:
    import numpy as np
    from safetensors.numpy import save_file

    from llmaudit.chapters.similarity import saved

    path = tmp_path / "m" / "similarity" / "representations.safetensors"
    path.parent.mkdir(parents=True)
    save_file({"model|0.5": np.zeros((1, 2), dtype=np.float32)}, str(path), metadata={"order": DEEP})
    with pytest.raises(DataError, match=r"representations.safetensors is nested deeper than 64 levels: rerun"):
        saved._read_representations(path)
