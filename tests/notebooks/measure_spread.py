"""Measure how far the ci audit moves on another CPU, the evidence behind tests/tolerance.py's tolerances.

Each variant re-executes every chapter as `make nbval-reference` does, in an environment that changes the floating-point
order of the computation without changing the code: another vector instruction set for PyTorch's kernels and MKL, and
another thread count. Every real number of results.csv and of the chapters' printed outputs is compared with the
reference; spread.csv records each difference, largest first. Usage (minutes per variant, from the repository root):
`.venv/bin/python tests/notebooks/measure_spread.py [VARIANT ...]`, `--reuse` to compare folders already executed."""

from __future__ import annotations

import argparse
import csv
import os
import sys
from pathlib import Path

import nbformat

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from make_reference import main as execute_all  # noqa: E402

from tolerance import INTEGER, NUMBER, read_rows  # noqa: E402

# Each variant's environment: read by the chapter kernels as they start (PyTorch's dispatch and MKL read it once).
VARIANTS: dict[str, dict[str, str]] = {
    "avx2-1thread": {"ATEN_CPU_CAPABILITY": "avx2", "MKL_ENABLE_INSTRUCTIONS": "AVX2", "OMP_NUM_THREADS": "1",
                     "MKL_NUM_THREADS": "1"},
    "default-1thread": {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"},
}
SPREAD = HERE / "spread.csv"
FIELDS = ("variant", "where", "quantity", "reference", "variant_value", "abs_diff", "rel_diff")


def _diff(variant: str, where: str, quantity: str, got: str, expected: str) -> dict[str, object] | None:
    """One real number's difference, or None for equal, non-numeric or integer values."""
    if got == expected or INTEGER.fullmatch(expected or "x"):
        return None
    try:
        a, b = float(got), float(expected)
    except ValueError:
        return None
    gap = abs(a - b)
    return {"variant": variant, "where": where, "quantity": quantity, "reference": expected, "variant_value": got,
            "abs_diff": gap, "rel_diff": gap / abs(b) if b else float("inf")}


def results_spread(variant: str, folder: Path) -> list[dict[str, object]]:
    """Differences of every results row's value and interval from the reference results file."""
    test, reference = read_rows(folder / "results.csv"), read_rows(HERE / "results.csv")
    rows = []
    for key in sorted(reference.keys() & test.keys()):
        for field in ("value", "lo", "hi"):
            row = _diff(variant, "results.csv", f"{key[0]}:{key[1]}.{field}", test[key][field], reference[key][field])
            rows += [row] if row else []
    return rows


def _texts(path: Path) -> list[tuple[str, str]]:
    """(cell, text) of every printed text output of an executed notebook."""
    texts = []
    for i, cell in enumerate(nbformat.read(path, as_version=4).cells):
        for out in cell.get("outputs", []):
            text = out.get("text") or out.get("data", {}).get("text/plain")
            if isinstance(text, str):
                texts.append((f"{path.stem} cell {i}", text))
    return texts


def cells_spread(variant: str, folder: Path) -> list[dict[str, object]]:
    """Differences of the numbers printed in each chapter's cells, paired in order where the texts line up."""
    rows = []
    for reference in sorted(HERE.glob("*.ipynb")):
        for (where, got), (_, expected) in zip(_texts(folder / reference.name), _texts(reference)):
            got_parts, expected_parts = NUMBER.split(got), NUMBER.split(expected)
            if len(got_parts) != len(expected_parts):
                continue
            for a, b in zip(got_parts[1::2], expected_parts[1::2]):
                row = _diff(variant, where, "printed", a, b)
                rows += [row] if row else []
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("variants", nargs="*", help=f"any of {', '.join(VARIANTS)} (default: all)")
    parser.add_argument("--into", type=Path, default=Path("reports/spread"), help="where the executed chapters go")
    parser.add_argument("--reuse", action="store_true", help="compare folders already executed")
    args = parser.parse_args()
    if unknown := set(args.variants) - set(VARIANTS):
        parser.error(f"unknown variant {', '.join(sorted(unknown))}: choose from {', '.join(VARIANTS)}")
    rows: list[dict[str, object]] = []
    original = dict(os.environ)
    for variant in args.variants or list(VARIANTS):
        folder = args.into / variant
        if not args.reuse:
            folder.mkdir(parents=True, exist_ok=True)
            os.environ.clear()
            os.environ.update(original | VARIANTS[variant])
            execute_all([], into=folder.resolve(), report=folder / "report")
        rows += results_spread(variant, folder) + cells_spread(variant, folder)
    rows.sort(key=lambda row: -float(row["rel_diff"]))  # type: ignore[arg-type]
    with SPREAD.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=FIELDS)
        writer.writeheader()
        writer.writerows(rows)
    print(f"{len(rows)} differing numbers -> {SPREAD}")


if __name__ == "__main__":
    main()
