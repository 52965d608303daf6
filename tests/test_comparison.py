"""`llmaudit compare A B`: D = |mean_A| - |mean_B| over the units both audits drew, its paired bootstrap interval,
the outcome against epsilon, the files it writes and the index link, on synthetic case files."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from llmaudit.cli import main
from llmaudit.errors import AuditError
from llmaudit.report import Results
from llmaudit.report.comparison import N_BOOT, SEED, compare_cases, compare_models
from llmaudit.report.comparison_files import write_comparison
from llmaudit.report.evidence import read_cases, write_cases
from llmaudit.stats import paired_bootstrap

TEST = "credit.blackbox_explicit"


def case_records(values: dict[str, float], test: str = TEST) -> pd.DataFrame:
    """Black-box records whose per-unit gap (female - male) is `values[unit]`."""
    return pd.DataFrame([
        {"test": test, "unit": unit, "value": value, "group": group, "lam": None, "prompt_sha": None,
         "prompt": f"applicant {unit} is {group}", "metric": 0.5 + sign * value / 2, "mass": 0.9}
        for unit, value in values.items() for group, sign in (("female", 1), ("male", -1))
    ])


def per_unit(mean: float, n: int, seed: int, sd: float = 0.05, prefix: str = "u") -> dict[str, float]:
    rng = np.random.default_rng(seed)
    return {f"{prefix}{i:03d}": float(v) for i, v in enumerate(mean + rng.normal(0, sd, n))}


def audited(reports: Path, name: str, records: pd.DataFrame, epsilon: float | dict[str, float] | None = 0.05) -> Path:
    """A report folder as an audit leaves it: model card, results file and a case file."""
    folder = reports / name
    folder.mkdir(parents=True)
    write_cases(folder, "decision_tasks", records)
    if epsilon is not None:
        card = {"model": {"source": "test"}, "params": {"name": name, "epsilon": epsilon, "gates": {}}}
        (folder / "model_card.json").write_text(json.dumps(card), encoding="utf-8")
    results = Results(folder / "results.csv")
    values = records.drop_duplicates("unit")["value"]
    results.record("decision_tasks", TEST, float(values.mean()), float(values.min()), float(values.max()),
                   n=len(values))
    return folder


def cases_of(values: dict[str, float], test: str = TEST) -> pd.DataFrame:
    return case_records(values, test).assign(chapter="decision_tasks")


def test_a_known_difference_is_found_and_covered() -> None:
    a, b = cases_of(per_unit(0.10, 200, 1)), cases_of(per_unit(0.0, 200, 2))
    result = compare_cases(a, b, 0.05, "a", "b")
    row = result.tests.iloc[0]
    assert row["test"] == TEST and row["n_shared"] == 200 and row["outcome"] == "A more biased"
    assert row["lo"] <= 0.10 <= row["hi"] and row["lo"] > 0.05
    assert row["d"] == pytest.approx(abs(row["score_a"]) - abs(row["score_b"]))
    assert row["score_a_lo"] <= row["score_a"] <= row["score_a_hi"] and row["chapter"] == "decision_tasks"


def test_no_difference_is_tied() -> None:
    a, b = cases_of(per_unit(0.01, 200, 3)), cases_of(per_unit(0.01, 200, 4))
    row = compare_cases(a, b, 0.05).tests.iloc[0]
    assert row["outcome"] == "tied" and -0.05 <= row["lo"] <= row["hi"] <= 0.05
    assert compare_cases(a, b, 0.001).tests.iloc[0]["outcome"] == "inconclusive"


def test_swapping_the_models_flips_sign_and_outcome() -> None:
    a, b = cases_of(per_unit(0.10, 200, 1)), cases_of(per_unit(0.0, 200, 2))
    ab, ba = compare_cases(a, b, 0.05).tests.iloc[0], compare_cases(b, a, 0.05).tests.iloc[0]
    assert ba["d"] == -ab["d"]
    assert ba["lo"] == pytest.approx(-ab["hi"], abs=1e-12) and ba["hi"] == pytest.approx(-ab["lo"], abs=1e-12)
    assert (ab["outcome"], ba["outcome"]) == ("A more biased", "B more biased")
    assert (ba["score_a"], ba["score_b"]) == (ab["score_b"], ab["score_a"])


def test_only_shared_units_count() -> None:
    shared_a, shared_b = per_unit(0.02, 100, 5), per_unit(0.02, 100, 6)
    a = cases_of({**shared_a, **per_unit(5.0, 30, 7, prefix="onlya")})  # far out, but not drawn by B
    b = cases_of({**per_unit(-3.0, 20, 8, prefix="onlyb"), **shared_b})
    row = compare_cases(a, b, 0.05).tests.iloc[0]
    assert (row["n_shared"], row["n_a"], row["n_b"]) == (100, 130, 120)
    assert row["score_a"] == pytest.approx(np.mean(list(shared_a.values())), abs=1e-12)
    assert row["score_b"] == pytest.approx(np.mean(list(shared_b.values())), abs=1e-12)
    assert row["outcome"] == "tied"
    alone = compare_cases(cases_of(shared_a), cases_of(shared_b), 0.05).tests.iloc[0]
    assert (alone["d"], alone["lo"], alone["hi"]) == (row["d"], row["lo"], row["hi"])  # the same resamples


def test_tests_on_one_side_are_not_comparable() -> None:
    a = pd.concat([cases_of(per_unit(0.0, 50, 1)), cases_of(per_unit(0.0, 50, 2), "credit.whitebox_slope")])
    b = pd.concat([cases_of(per_unit(0.0, 50, 3)), cases_of(per_unit(0.0, 50, 4), "judicial_penalty.whitebox_slope"),
                   cases_of({"u000": 0.1}, "credit.blackbox_implicit")])
    a = pd.concat([a, cases_of({"u001": 0.1}, "credit.blackbox_implicit")])
    result = compare_cases(a, b, 0.05)
    assert result.tests["test"].tolist() == [TEST]
    assert dict(zip(result.not_comparable["test"], result.not_comparable["reason"])) == {
        "credit.whitebox_slope": "only in A", "judicial_penalty.whitebox_slope": "only in B",
        "credit.blackbox_implicit": "0 shared units (an interval needs 2)"}


def test_paired_bootstrap_is_seeded() -> None:
    a, b = np.linspace(0, 1, 30), np.linspace(1, 0, 30) ** 2
    assert paired_bootstrap(a, b, N_BOOT, SEED) == paired_bootstrap(a, b, N_BOOT, SEED)
    d, score_a, score_b = paired_bootstrap(a, b, n_boot=2000, seed=0)
    assert d.value == pytest.approx(abs(a.mean()) - abs(b.mean())) and d.lo <= d.value <= d.hi
    assert score_a.value == pytest.approx(a.mean()) and score_b.value == pytest.approx(b.mean())
    with pytest.raises(AuditError, match="at least 2 shared units"):
        paired_bootstrap(a[:1], b[:1], N_BOOT, SEED)


def test_compare_errors_say_what_to_run(tmp_path) -> None:
    audited(tmp_path, "m1", case_records(per_unit(0.1, 20, 1)))
    audited(tmp_path, "m2", case_records(per_unit(0.1, 20, 2, prefix="v")))
    (tmp_path / "bare").mkdir()
    problems = {
        ("m1", "nope"): "no report folder 'nope'.*llmaudit audit nope",
        ("m1", "../m2"): "no report folder",
        ("m1", "bare"): "has no case files.*llmaudit audit bare --chapter decision_tasks",
        ("m1", "m2"): "share no units in any of their 1 common test.*same params",
    }
    for (a, b), message in problems.items():
        with pytest.raises(AuditError, match=message) as err:
            compare_models(tmp_path, a, b)
        assert "\n" not in str(err.value)
    audited(tmp_path, "m3", case_records(per_unit(0.1, 20, 3)), epsilon=0.02)
    with pytest.raises(AuditError, match=r"epsilons differ \(m1: 0.05, m3: 0.02\): pass --epsilon"):
        compare_models(tmp_path, "m1", "m3")
    assert compare_models(tmp_path, "m1", "m3", epsilon=0.2).epsilon_source == "--epsilon"
    audited(tmp_path, "m4", case_records(per_unit(0.1, 20, 4)), epsilon=None)
    with pytest.raises(AuditError, match="no params.epsilon in the model card of m4: pass --epsilon"):
        compare_models(tmp_path, "m1", "m4")
    for wide in (float("nan"), 1.0, 1e308):  # a margin of 1 ties every test: the old code took 1e308
        with pytest.raises(AuditError, match="a number >= 0 and < 1"):
            compare_models(tmp_path, "m1", "m3", epsilon=wide)


def test_compare_reads_the_cards_margins_per_unit(tmp_path, capsys) -> None:
    """A card of this version holds one margin per unit: one threshold judges every compared test, so they must
    agree; --epsilon past the margins' top is one line and exit 2."""
    for name, seed in (("a", 1), ("b", 2)):
        audited(tmp_path, name, case_records(per_unit(0.1, 20, seed)), epsilon={"slope": 0.03, "gap": 0.03,
                                                                                 "fpr_gap": 0.03})
    assert compare_models(tmp_path, "a", "b").epsilon == 0.03
    audited(tmp_path, "c", case_records(per_unit(0.1, 20, 3)), epsilon={"slope": 0.02, "gap": 0.05, "fpr_gap": 0.02})
    with pytest.raises(AuditError, match="model card of c sets a margin per unit .*gap 0.05.*: pass --epsilon"):
        compare_models(tmp_path, "a", "c")
    assert main(["compare", "a", "b", "--reports", str(tmp_path), "--epsilon", "1e308"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "--epsilon must be a number >= 0 and < 1" in err


def test_compare_command_end_to_end(tmp_path, capsys) -> None:
    first = case_records(per_unit(0.10, 200, 1))
    second = case_records(per_unit(0.0, 200, 2))
    second = pd.concat([second, case_records(per_unit(0.0, 10, 3), "credit.<b>whitebox</b>_slope")])
    audited(tmp_path, "model-a", first)
    audited(tmp_path, "model-b", second)

    assert main(["compare", "model-a", "model-b", "--reports", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "A = model-a, B = model-b, epsilon = 0.05 (model cards)" in out
    assert "A more biased (model-a)" in out and "not comparable: credit.<b>whitebox</b>_slope (only in model-b)" in out
    data = json.loads((tmp_path / "compare" / "model-a+vs+model-b.json").read_text(encoding="utf-8"))
    assert data["a"] == "model-a" and data["epsilon"] == 0.05 and data["interval"]["n_boot"] == 2000
    assert [t["outcome"] for t in data["tests"]] == ["A more biased"] and data["tests"][0]["n_shared"] == 200
    assert data["not_comparable"] == [{"test": "credit.<b>whitebox</b>_slope", "reason": "only in model-b"}]

    page = (tmp_path / "compare" / "model-a+vs+model-b.html").read_text(encoding="utf-8")
    assert "<b>whitebox</b>" not in page and "credit.&lt;b&gt;whitebox&lt;/b&gt;_slope" in page
    assert "<script" not in page and "src=" not in page and "<link" not in page and "http" not in page
    assert 'href="../model-a/report.html"' in page and "A more biased" in page

    index = (tmp_path / "index.html").read_text(encoding="utf-8")
    assert 'href="compare/model-a%2Bvs%2Bmodel-b.html"' in index
    assert "model-a vs model-b (model-a more biased: 1)" in index

    assert main(["compare", "model-b", "model-a", "--reports", str(tmp_path), "--epsilon", "0.5"]) == 0
    swapped = json.loads((tmp_path / "compare" / "model-b+vs+model-a.json").read_text(encoding="utf-8"))
    assert swapped["tests"][0]["outcome"] == "tied" and swapped["epsilon_source"] == "--epsilon"
    assert swapped["tests"][0]["d"] == -data["tests"][0]["d"]
    index = (tmp_path / "index.html").read_text(encoding="utf-8")
    assert index.count('href="compare/') == 2

    capsys.readouterr()
    assert main(["compare", "model-a", "missing", "--reports", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("llmaudit: error: no report folder 'missing'") and err.count("\n") == 1


def test_comparison_written_from_read_cases(tmp_path) -> None:
    audited(tmp_path, "x", case_records(per_unit(0.0, 30, 1)))
    audited(tmp_path, "y", case_records(per_unit(0.0, 30, 2)))
    result = compare_cases(read_cases(tmp_path / "x"), read_cases(tmp_path / "y"), 0.05, "x", "y")
    json_path, html_path = write_comparison(tmp_path, result, generated="2025-01-01 00:00 UTC")
    assert json_path.name == "x+vs+y.json" and html_path.name == "x+vs+y.html"
    assert html_path.read_text(encoding="utf-8") == write_comparison(tmp_path, result, "2025-01-01 00:00 UTC")[1] \
        .read_text(encoding="utf-8")
    assert not [p for p in (tmp_path / "compare").iterdir() if p.name.startswith(".")]
