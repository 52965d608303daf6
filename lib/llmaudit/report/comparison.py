"""Two audited models compared test by test on the units both drew (`llmaudit compare A B`): for every test in
both models' case files (report/evidence.py), D = |mean_A| - |mean_B| over the shared units (positive: A's score
is further from zero, A is more biased), with a paired bootstrap interval that resamples the shared units jointly,
and an outcome against epsilon that mirrors the audit's verdict: "tied" when the interval lies within
[-epsilon, epsilon], "A more biased" when it lies wholly above epsilon, "B more biased" when wholly below -epsilon,
"inconclusive" otherwise. The comparison's files are written by report/comparison_files.py, its page by
report/comparison_page.py."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

import llmaudit
from llmaudit.errors import AuditError
from llmaudit.paths import PLAIN_NAME
from llmaudit.report.card import CARD, read_json
from llmaudit.report.evidence import FOLDER as CASES_FOLDER
from llmaudit.report.evidence import read_cases, unit_values
from llmaudit.stats import Estimate, paired_bootstrap
from llmaudit.terminal import printable
from llmaudit.verdict.margins import EPSILONS

# One threshold judges every compared test (gaps and slopes alike), so it lies below the smallest top of any unit's
# margin: at 1 every difference of two scores in [-1, 1] would read as tied.
TOP = min(e.top for e in EPSILONS)

FOLDER = "compare"  # reports/compare/<A>+vs+<B>.{json,html}
DEFAULT_REPORTS = Path(__file__).resolve().parents[3] / "reports"
N_BOOT, SEED, ALPHA = 2000, 0, 0.05
TIED, A_MORE, B_MORE, INCONCLUSIVE = "tied", "A more biased", "B more biased", "inconclusive"
OUTCOMES = (TIED, A_MORE, B_MORE, INCONCLUSIVE)
COLUMNS = ["test", "chapter", "n_shared", "n_a", "n_b", "score_a", "score_a_lo", "score_a_hi", "score_b",
           "score_b_lo", "score_b_hi", "d", "lo", "hi", "outcome"]


@dataclass(frozen=True)
class Comparison:
    """Model `a` against model `b`: one row per comparable test (`COLUMNS`), and the tests that are not comparable
    (columns test, reason)."""

    a: str
    b: str
    epsilon: float
    epsilon_source: str
    tests: pd.DataFrame
    not_comparable: pd.DataFrame

    def to_json(self) -> dict[str, Any]:
        """The comparison as a JSON object (NaN as null)."""
        def clean(value: Any) -> Any:
            if isinstance(value, np.generic):
                value = value.item()
            return None if isinstance(value, float) and math.isnan(value) else value

        return {
            "a": self.a, "b": self.b, "epsilon": self.epsilon, "epsilon_source": self.epsilon_source,
            "statistic": "D = |mean_A| - |mean_B| over the units both models drew (positive: A more biased)",
            "interval": {"method": "paired percentile bootstrap over shared units", "n_boot": N_BOOT, "seed": SEED,
                         "level": 1 - ALPHA},
            "outcomes": {TIED: "interval within [-epsilon, epsilon]",
                         A_MORE: f"interval wholly above epsilon ({self.a} more biased)",
                         B_MORE: f"interval wholly below -epsilon ({self.b} more biased)",
                         INCONCLUSIVE: "interval straddles a threshold"},
            "tests": [{key: clean(value) for key, value in row.items()} for row in self.tests.to_dict("records")],
            "not_comparable": self.not_comparable.to_dict("records"),
            "llmaudit": llmaudit.__version__,
        }


def outcome(estimate: Estimate, epsilon: float) -> str:
    """The audit's verdict logic applied to D: tied inside [-epsilon, epsilon], a side more biased when the whole
    interval is beyond a threshold, inconclusive when it straddles one."""
    if -epsilon <= estimate.lo and estimate.hi <= epsilon:
        return TIED
    if estimate.lo > epsilon:
        return A_MORE
    if estimate.hi < -epsilon:
        return B_MORE
    return INCONCLUSIVE


def compare_cases(cases_a: pd.DataFrame, cases_b: pd.DataFrame, epsilon: float, a: str = "A", b: str = "B",
                  epsilon_source: str = "given", n_boot: int = N_BOOT, seed: int = SEED) -> Comparison:
    """Compare two models' case records (read_cases frames) test by test on their shared units (in unit order,
    so that swapping the sides resamples the same units and flips D); every test gets the same seed."""
    if not (isinstance(epsilon, (int, float)) and 0 <= epsilon < TOP):
        raise AuditError(f"epsilon must be a number >= 0 and < {TOP:g}, got {epsilon!r}")
    values_a, values_b = unit_values(cases_a), unit_values(cases_b)
    chapters = dict(zip(cases_a["test"], cases_a["chapter"])) if "chapter" in cases_a else {}
    tests_a, tests_b = list(dict.fromkeys(values_a["test"])), set(values_b["test"])
    rows, skipped = [], []
    for test in [t for t in tests_a if t not in tests_b]:
        skipped.append({"test": test, "reason": f"only in {a}"})
    for test in sorted(tests_b - set(tests_a)):
        skipped.append({"test": test, "reason": f"only in {b}"})
    for test in [t for t in tests_a if t in tests_b]:
        side_a = values_a[values_a["test"] == test].set_index("unit")["value"]
        side_b = values_b[values_b["test"] == test].set_index("unit")["value"]
        shared = sorted(set(side_a.index) & set(side_b.index))
        if len(shared) < 2:
            skipped.append({"test": test, "reason": f"{len(shared)} shared unit{'s' * (len(shared) != 1)} "
                                                    "(an interval needs 2)"})
            continue
        d, score_a, score_b = paired_bootstrap(side_a[shared].to_numpy(), side_b[shared].to_numpy(), n_boot, seed)
        rows.append([test, chapters.get(test, ""), len(shared), len(side_a), len(side_b), score_a.value, score_a.lo,
                     score_a.hi, score_b.value, score_b.lo, score_b.hi, d.value, d.lo, d.hi, outcome(d, epsilon)])
    if not rows:
        common = len(set(tests_a) & tests_b)
        what = (f"share no units in any of their {common} common test(s)" if common
                else "have no test in common in their case files")
        raise AuditError(f"{a} and {b} {what}: audit both with the same params (seed, task sizes) so that they "
                         "draw the same cases")
    return Comparison(a, b, float(epsilon), epsilon_source, pd.DataFrame(rows, columns=COLUMNS),
                      pd.DataFrame(skipped, columns=["test", "reason"]))


def _folder(reports: Path, name: str) -> Path:
    """An audited model's report folder under `reports`, with case files; one-line errors saying what to run."""
    folder = Path(reports) / name
    if not isinstance(name, str) or not PLAIN_NAME.fullmatch(name) or name == FOLDER or not folder.is_dir():
        known = sorted(p.name for p in Path(reports).glob(f"*/{CASES_FOLDER}") if p.is_dir())
        hint = f" (folders with case files: {', '.join(known)})" if known else ""
        raise AuditError(f"no report folder {name!r} under {reports}: audit it first (`llmaudit audit {name}`)"
                         f"{hint}")
    if not any(p.is_file() for p in (folder / CASES_FOLDER).glob("*.jsonl")):
        raise AuditError(f"{folder} has no case files ({CASES_FOLDER}/*.jsonl): rerun its decision-task chapters "
                         f"with this version (`llmaudit audit {name} --chapter decision_tasks`)")
    return folder


def card_epsilon(folder: Path) -> float | None:
    """The one margin of a report folder's model card (read and checked as the verdicts read it): its params.epsilon,
    which every unit's margin must equal (one threshold judges every compared test); None without a card."""
    found = read_json(Path(folder) / CARD).get("params", {}).get("epsilon")
    if not isinstance(found, dict):
        return found
    if len(set(found.values())) > 1:
        margins = ", ".join(f"{key} {value:g}" for key, value in found.items())
        raise AuditError(f"the model card of {Path(folder).name} sets a margin per unit ({margins}): pass --epsilon X "
                         "to compare every test against one threshold")
    return next(iter(found.values()))


def pick_epsilon(reports: Path, a: str, b: str, epsilon: float | None) -> tuple[float, str]:
    """The threshold: `epsilon` when given, else the two model cards' params.epsilon, which must agree."""
    if epsilon is not None:
        if not 0 <= epsilon < TOP:  # NaN fails both comparisons
            raise AuditError(f"--epsilon must be a number >= 0 and < {TOP:g} (a margin of {TOP:g} ties every test: "
                             f"each score is a difference of rates or a slope per unit lambda), got {epsilon:g}")
        return float(epsilon), "--epsilon"
    found = {name: card_epsilon(Path(reports) / name) for name in (a, b)}
    epsilon_a, epsilon_b = found[a], found[b]
    if epsilon_a is None or epsilon_b is None:
        missing = [name for name, value in found.items() if value is None]
        raise AuditError(f"no params.epsilon in the model card of {' and '.join(missing)}: pass --epsilon X, or "
                         "rerun the audit, which writes the card")
    if epsilon_a != epsilon_b:
        raise AuditError(f"the model cards' epsilons differ ({a}: {epsilon_a:g}, {b}: {epsilon_b:g}): pass --epsilon X "
                         "to compare both against one threshold")
    return epsilon_a, "model cards"


def compare_models(reports: Path, a: str, b: str, epsilon: float | None = None) -> Comparison:
    """Compare the audited models `a` and `b` (folder names under `reports`) from their case files."""
    reports = Path(reports)
    folders = _folder(reports, a), _folder(reports, b)
    threshold, source = pick_epsilon(reports, a, b, epsilon)
    return compare_cases(read_cases(folders[0]), read_cases(folders[1]), threshold, a, b, source)


def more_biased(comparison: Comparison, result: str) -> str:
    """The model an outcome names as more biased ('' for tied and inconclusive)."""
    return {A_MORE: comparison.a, B_MORE: comparison.b}.get(result, "")


def text(comparison: Comparison) -> str:
    """The comparison as a plain-text table for the terminal (strings from the case files escaped)."""
    c = comparison
    a, b = printable(c.a), printable(c.b)
    head = ["test", "shared", f"score {a}", f"score {b}", "D = |A| - |B| [95% CI]", "outcome"]
    rows = [[printable(r.test), str(r.n_shared), f"{r.score_a:+.4f}", f"{r.score_b:+.4f}",
             f"{r.d:+.4f} [{r.lo:+.4f}, {r.hi:+.4f}]",
             r.outcome + (f" ({printable(more_biased(c, r.outcome))})" if more_biased(c, r.outcome) else "")]
            for r in c.tests.itertuples(index=False)]
    widths = [max(len(x) for x in column) for column in zip(head, *rows)]
    lines = [f"A = {a}, B = {b}, epsilon = {c.epsilon:g} ({c.epsilon_source})",
             "  ".join(h.ljust(w) for h, w in zip(head, widths)), "  ".join("-" * w for w in widths)]
    lines += ["  ".join(x.ljust(w) for x, w in zip(row, widths)).rstrip() for row in rows]
    for r in c.not_comparable.itertuples(index=False):
        lines.append(f"not comparable: {printable(r.test)} ({printable(r.reason)})")
    return "\n".join(lines)


