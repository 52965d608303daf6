"""The regression suite's comparison of a re-executed chapter with its reference, within the spread that the same
code shows across CPUs: exact for text, integers and booleans, within a tolerance per quantity for real numbers.

Floating-point sums in matrix products and softmaxes run in another order on another CPU (vector width, thread
count), so the same audit differs in its last bits there, and a few printed digits flip. The tolerances (per results
quantity in `llmaudit.tolerance`; for printed numbers below) come from measuring that spread
(`tests/notebooks/measure_spread.py`, recorded in `tests/notebooks/spread.csv`): the ci audit re-run with another
vector instruction set and thread count. Each is a few times the largest difference measured for its quantity, and
far below a change of one digit in the third significant place."""

from __future__ import annotations

import copy
import csv
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from llmaudit.tolerance import Tolerance, results_tolerance

# Numbers printed in a chapter's cells, besides half a last printed digit each: five times the largest difference left
# after that rounding (1e-4, a Pearson r over six cases in the robustness chapter).
CELL_TOLERANCE = Tolerance(atol=5e-4, rtol=0.0)

NUMBER = re.compile(r"([-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?)")
INTEGER = re.compile(r"[-+]?\d+")


def _last_digit(token: str) -> float:
    """The unit of a printed number's last digit (0 for an integer, which is exact)."""
    mantissa, _, exponent = token.lower().partition("e")
    decimals = len(mantissa.partition(".")[2]) if "." in mantissa else 0
    if "." not in mantissa and not exponent:
        return 0.0
    return 10.0 ** (int(exponent or 0) - decimals)


def numbers_agree(test: str, reference: str, tol: Tolerance) -> bool:
    """Two printed numbers agree: integers exactly, others within `tol` plus half a last digit of each (a value
    near a rounding boundary prints one digit apart on two CPUs)."""
    if INTEGER.fullmatch(test) and INTEGER.fullmatch(reference):
        return int(test) == int(reference)
    slack = (_last_digit(test) + _last_digit(reference)) / 2
    return tol.allows(float(test), float(reference), slack)


def texts_agree(test: str, reference: str, tol: Tolerance) -> bool:
    """Two printed outputs agree: the same words and integers, real numbers within `tol`; runs of whitespace count as
    one (a table's columns widen when a number gains a digit)."""
    test_parts, reference_parts = NUMBER.split(test), NUMBER.split(reference)
    if len(test_parts) != len(reference_parts):
        return False
    for i, (a, b) in enumerate(zip(test_parts, reference_parts)):
        same = numbers_agree(a, b, tol) if i % 2 else a.split() == b.split()
        if not same:
            return False
    return True


def align_outputs(test: Sequence[Any], reference: Sequence[Any], tol: Tolerance) -> list[Any]:
    """The test cell's outputs with each text that agrees with its reference replaced by the reference's text, so
    that an exact comparison afterwards (nbval's) reports only the real differences, in full."""
    aligned = [copy.deepcopy(out) for out in test]
    for out, ref in zip(aligned, reference):
        if out.get("output_type") != ref.get("output_type") or out.get("name") != ref.get("name"):
            continue
        if "text" in out and "text" in ref and texts_agree(out["text"], ref["text"], tol):
            out["text"] = ref["text"]
        for mime, value in out.get("data", {}).items():
            expected = ref.get("data", {}).get(mime)
            if mime.startswith("text/") and isinstance(value, str) and isinstance(expected, str) \
                    and texts_agree(value, expected, tol):
                out["data"][mime] = expected
    return aligned


def read_rows(path: Path) -> dict[tuple[str, str], dict[str, str]]:
    """A results file's rows keyed by (chapter, name)."""
    with path.open(newline="", encoding="utf-8") as handle:
        return {(row["chapter"], row["name"]): row for row in csv.DictReader(handle)}


def _cell_agrees(test: str, reference: str, tol: Tolerance) -> bool:
    """One results cell: empty, text, booleans and integers exactly; real numbers within `tol`."""
    if test == reference:
        return True
    try:
        a, b = float(test), float(reference)
    except ValueError:
        return False
    if INTEGER.fullmatch(test) and INTEGER.fullmatch(reference):
        return False
    return tol.allows(a, b)


def results_differences(
    test: dict[tuple[str, str], dict[str, str]], reference: dict[tuple[str, str], dict[str, str]]
) -> list[str]:
    """Every row missing, added, or with a field outside its quantity's tolerance, one line each."""
    lines = [f"{chapter}:{name} missing" for chapter, name in reference.keys() - test.keys()]
    lines += [f"{chapter}:{name} not in the reference" for chapter, name in test.keys() - reference.keys()]
    for key in sorted(reference.keys() & test.keys()):
        tol = results_tolerance(*key)
        for field in ("value", "lo", "hi", "unit", "note", "n", "meaning", "flag"):
            got, expected = test[key].get(field, ""), reference[key].get(field, "")
            if not _cell_agrees(got, expected, tol):
                lines.append(f"{key[0]}:{key[1]} {field} = {got}, reference {expected} ({tol})")
    return lines
