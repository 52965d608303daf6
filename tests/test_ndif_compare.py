"""scripts/ndif/compare.py, which `make test-remote` ends with: a remote report agrees with the local one only when
every results row and every steering vector is within the tolerance, nothing is on one side only, and the remote
report's ledger shows only remote passes."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
import torch

from llmaudit.models.vector import SteeringVector
from llmaudit.report.results import Results
from llmaudit.runner.chapter import VECTORS

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "ndif" / "compare.py"


@pytest.fixture(scope="module")
def compare():
    """The script as a module."""
    spec = importlib.util.spec_from_file_location("ndif_compare", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def report(folder: Path, value: float, direction: torch.Tensor, ledger_label: str | None = None) -> Path:
    """A report folder with two committed results rows (one with an interval), a saved vector and, optionally, a
    ledger with one call."""
    results = Results(folder / "results.csv", staged="steering_vectors")
    results.record("steering_vectors", "gap", value, lo=value - 0.1, hi=value + 0.1, unit="pp", n=12)
    results.record("steering_vectors", "layer", 14)
    results.commit("steering_vectors")
    SteeringVector(name="gender_lang", concept="gender", layer=14, k=2.0, direction=direction,
                   mean=torch.zeros(4)).save(folder / VECTORS)
    if ledger_label is not None:
        (folder / "ledger").mkdir()
        calls = {ledger_label: {"actual": 0, "minimum": 10, "seconds": 1.0}}
        (folder / "ledger" / "steering_vectors.json").write_text(
            json.dumps({"blocks": 30, "actual": 0, "minimum": 10, "calls": calls}))
    return folder


@pytest.fixture
def local(tmp_path):
    return report(tmp_path / "local", 0.123456, torch.tensor([0.5, 0.5, 0.5, 0.5]))


def test_agreeing_reports_exit_0(compare, local, tmp_path, capsys) -> None:
    remote = report(tmp_path / "remote", 0.123456 * (1 + 1e-7), torch.tensor([0.5, 0.5, 0.5, 0.5 + 1e-7]),
                    "remote: gender_lang train")
    assert compare.main([str(local), str(remote), "--markdown", str(tmp_path / "side.md")]) == 0
    out = capsys.readouterr().out
    assert "all agree" in out and "| steering_vectors | gap | 0.123456 |" in out
    assert (tmp_path / "side.md").read_text().count("| steering_vectors |") == 2


@pytest.mark.parametrize("value, direction, label, what", [
    (0.123456 * (1 + 1e-3), [0.5, 0.5, 0.5, 0.5], "remote: x", "steering_vectors/gap"),  # beyond its 2e-5
    (0.123456, [0.5, 0.5, 0.5, 0.5001], "remote: x", "direction differs"),  # a vector beyond 1e-5
    (0.123456, [0.5, 0.5, 0.5, 0.5], "traced: x", "ran ['traced: x'] locally"),  # a pass that did not go to NDIF
])
def test_a_difference_is_named_and_exits_1(compare, local, tmp_path, capsys, value, direction, label, what) -> None:
    remote = report(tmp_path / "remote", value, torch.tensor(direction), label)
    assert compare.main([str(local), str(remote)]) == 1
    assert what in capsys.readouterr().out


def test_a_row_on_one_side_only_differs(compare, local, tmp_path) -> None:
    remote = report(tmp_path / "remote", 0.123456, torch.tensor([0.5, 0.5, 0.5, 0.5]), "remote: x")
    results = Results(remote / "results.csv", staged="steering_vectors")
    results.record("steering_vectors", "extra", 1.0)
    results.commit("steering_vectors")
    rows = compare.compare_rows(compare._rows(local, None), compare._rows(remote, None))
    assert rows.set_index("name").loc["extra", "agree"] == False  # noqa: E712  (numpy bool)


def test_only_the_remote_reports_chapters_are_compared(compare, local, tmp_path) -> None:
    results = Results(local / "results.csv", staged="framing")
    results.record("framing", "only_local", 1.0)
    results.commit("framing")
    remote = report(tmp_path / "remote", 0.123456, torch.tensor([0.5, 0.5, 0.5, 0.5]), "remote: x")
    assert compare.main([str(local), str(remote)]) == 0


def test_missing_report_is_one_line(compare, local, tmp_path) -> None:
    from llmaudit.errors import AuditError

    with pytest.raises(AuditError, match="results.csv is missing"):
        compare.main([str(local), str(tmp_path / "absent")])


def test_cells(compare) -> None:
    tol = compare.VECTOR_FIELD_TOLERANCE
    assert compare.close(float("nan"), None, tol) and compare.close("pp", "pp", tol)
    assert not compare.close(1.0, None, tol)
    assert compare.close(1e-7, 2e-7, tol) and not compare.close(1.0, 1.0001, tol) and compare.close(3, 3, tol)


def test_rows_agree_within_their_quantitys_measured_tolerance(compare, local, tmp_path) -> None:
    """The remote run's competence moved by 3.2e-5 (a correlation, as it moves across CPUs); a slope may not."""
    for folder in (local, tmp_path / "remote"):
        if folder != local:
            report(folder, 0.123456, torch.tensor([0.5, 0.5, 0.5, 0.5]), "remote: x")
        results = Results(folder / "results.csv", staged="decision_tasks")
        shift = 0.0 if folder == local else 3.2e-5
        results.record("decision_tasks", "credit.competence", 0.44974 + shift)
        results.record("decision_tasks", "credit.whitebox_slope", -0.0161 + shift)
        results.commit("decision_tasks")
    rows = compare.compare_rows(compare._rows(local, None), compare._rows(tmp_path / "remote", None)).set_index("name")
    assert rows.loc["credit.competence", "agree"] and not rows.loc["credit.whitebox_slope", "agree"]


def test_derivative_rows_are_local_only_not_different(compare, local, tmp_path) -> None:
    for folder, value in ((local, -0.17), (tmp_path / "remote", float("nan"))):
        if folder != local:
            report(folder, 0.123456, torch.tensor([0.5, 0.5, 0.5, 0.5]), "remote: x")
        results = Results(folder / "results.csv", staged="decision_tasks")
        results.record("decision_tasks", "credit.whitebox_eq2", value,
                       note="" if folder == local else "the exact derivative is taken on local models only")
        results.record("decision_tasks", "credit.competence", 0.45 if folder == local else 0.4505)
        results.commit("decision_tasks")
    rows = compare.compare_rows(compare._rows(local, None), compare._rows(tmp_path / "remote", None)).set_index("name")
    assert rows.loc["credit.whitebox_eq2", "local_only"] and rows.loc["credit.whitebox_eq2", "agree"]
    assert not rows.loc["credit.competence", "agree"]  # an ordinary row that is NaN or off on one side still differs
