"""Compare a remote (NDIF) audit with the local one of the same model and sizes: every results row of the chapters
the remote run has, side by side, and every saved steering vector; exit status 1 when anything differs by more
than the tolerance, or is on one side only. Usage: compare.py LOCAL_REPORT REMOTE_REPORT [--markdown FILE]."""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import pandas as pd

from llmaudit.errors import AuditError, run_script
from llmaudit.ledger import read_calls
from llmaudit.models.vector import SteeringVector
from llmaudit.report.results import Results
from llmaudit.runner.chapter import VECTORS
from llmaudit.tolerance import Tolerance, results_tolerance

# Both sides hold the same float32 weights and run the same traced forward; what may differ is the order of float32
# reductions (batching, threads). Results rows agree within the regression suite's tolerance per quantity
# (`llmaudit.tolerance`, measured as that spread across CPUs): a competence correlation moves by a few 1e-5 where a
# slope moves by 1e-6. The vectors agree within 1e-5 of their largest entry.
TOLERANCE = 1e-5
VECTOR_FIELD_TOLERANCE = Tolerance(atol=TOLERANCE, rtol=TOLERANCE)  # a vector's block and scale k
NUMBERS = ("value", "lo", "hi", "n")
VECTOR_FIELDS = ("concept", "layer", "k")
# Rows a remote model leaves empty: forward-mode derivatives need the model's weights here (scripts/ndif/README.md)
LOCAL_ONLY = (".whitebox_eq2", ".whitebox_exact_at_0")


def close(a: object, b: object, tolerance: Tolerance) -> bool:
    """Whether two results cells agree: numbers within the tolerance, missing with missing (NaN, None), text
    exactly."""
    missing = [x is None or (isinstance(x, float) and math.isnan(x)) or x is pd.NA for x in (a, b)]
    if any(missing):
        return all(missing)
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return tolerance.allows(float(a), float(b))
    return a == b


def _rows(report: Path, chapters: set[str] | None) -> pd.DataFrame:
    """A report's results rows (of `chapters`, None: all), indexed by (chapter, name)."""
    path = report / "results.csv"
    if not path.is_file():
        raise AuditError(f"{path} is missing: run that audit first")
    table = Results(path).table()
    if chapters is not None:
        table = table[table.chapter.isin(chapters)]
    return table.set_index(["chapter", "name"])


def compare_rows(local: pd.DataFrame, remote: pd.DataFrame) -> pd.DataFrame:
    """Every (chapter, name) of either side: local and remote value, their largest difference over value, lo, hi
    and n, and whether the row agrees (on both sides, every cell within its quantity's tolerance)."""
    out = []
    for key in sorted(set(local.index) | set(remote.index)):
        here, there = (side.loc[key] if key in side.index else None for side in (local, remote))
        tolerance = results_tolerance(*key)
        local_only = key[1].endswith(LOCAL_ONLY) and (there is None or close(there["value"], None, tolerance))
        agree = local_only or (here is not None and there is not None and all(
            close(here[f], there[f], tolerance) for f in (*NUMBERS, "unit", "note")))
        gaps = [abs(here[f] - there[f]) for f in NUMBERS if here is not None and there is not None
                and isinstance(here[f], (int, float)) and isinstance(there[f], (int, float))
                and not (math.isnan(here[f]) or math.isnan(there[f]))]
        out.append({"chapter": key[0], "name": key[1], "local": None if here is None else here["value"],
                    "remote": None if there is None else there["value"], "diff": max(gaps, default=math.nan),
                    "agree": agree, "local_only": local_only})
    return pd.DataFrame(out)


def compare_vectors(local: Path, remote: Path, tolerance: float = TOLERANCE) -> list[str]:
    """One line per steering vector that differs (direction or mean beyond the tolerance, other block or concept)
    or is saved on one side only; empty when all agree."""
    names = {p.name for p in local.glob("*.safetensors")} | {p.name for p in remote.glob("*.safetensors")}
    if not names:
        return [f"no steering vectors in {local} or {remote}"]
    problems = []
    for name in sorted(names):
        if not (local / name).is_file() or not (remote / name).is_file():
            problems.append(f"{name}: saved on one side only")
            continue
        a, b = SteeringVector.load(local / name), SteeringVector.load(remote / name)
        if not all(close(getattr(a, f), getattr(b, f), VECTOR_FIELD_TOLERANCE) for f in VECTOR_FIELDS):
            problems.append(f"{name}: {[(f, getattr(a, f), getattr(b, f)) for f in VECTOR_FIELDS]}")
        for field in ("direction", "mean"):
            x, y = getattr(a, field), getattr(b, field)
            # within the tolerance of the tensor's scale (its largest entry, 1 for a unit direction's): a mean of
            # hidden states runs to hundreds, where float32 holds about 7 digits
            if x.shape != y.shape or (x - y).abs().max() > tolerance * max(1.0, x.abs().max().item()):
                gap = (x - y).abs().max().item() if x.shape == y.shape else "shape"
                problems.append(f"{name}: {field} differs (largest gap {gap})")
    return problems


def remote_passes(report: Path) -> dict[str, list[str]]:
    """Per chapter, the ledger's call labels of the remote report that did not run on NDIF (empty lists: all did)."""
    return {chapter: [label for label in calls if not label.startswith("remote")]
            for chapter, calls in read_calls(report).items()}


def markdown(rows: pd.DataFrame) -> str:
    """The side-by-side table, one row per results row."""
    lines = ["| chapter | name | local | remote | largest diff | agree |", "|---|---|---|---|---|---|"]
    verdict = {(True, False): "yes", (False, False): "NO", (True, True): "local only"}
    lines += [f"| {r.chapter} | {r.name} | {r.local} | {r.remote} | {r.diff:.3g} | {verdict[r.agree, r.local_only]} |"
              for r in rows.itertuples()]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Compare, print the table and a verdict; 0 when everything agrees, 1 when not."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("local", type=Path)
    parser.add_argument("remote", type=Path)
    parser.add_argument("--markdown", type=Path, help="also write the side-by-side table here")
    args = parser.parse_args(argv)
    remote = _rows(args.remote, None)
    rows = compare_rows(_rows(args.local, set(remote.index.get_level_values(0))), remote)
    table = markdown(rows)
    print(table, end="")
    if args.markdown:
        args.markdown.write_text(table, encoding="utf-8")
    problems = [f"{r.chapter}/{r.name}: local {r.local}, remote {r.remote}" for r in rows.itertuples() if not r.agree]
    problems += compare_vectors(args.local / VECTORS, args.remote / VECTORS)
    problems += [f"ledger: {chapter} ran {labels} locally" for chapter, labels in remote_passes(args.remote).items()
                 if labels]
    for line in problems:
        print(f"differs: {line}")
    print(f"{len(rows)} results rows ({int(rows.local_only.sum())} local only, each within its quantity's tolerance: "
          f"llmaudit.tolerance) and the steering vectors ({TOLERANCE}) compared: "
          + (f"{len(problems)} differ" if problems else "all agree"))
    return 1 if problems else 0


if __name__ == "__main__":
    run_script(main, "compare")
