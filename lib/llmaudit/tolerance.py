"""How far two runs of the same audit may differ and still agree: a tolerance per quantity of results.csv, measured
as the spread the same code shows when its floating-point sums run in another order (another CPU's vector width and
threads, another batching). The regression suite (tests/tolerance.py) and the remote comparison
(scripts/ndif/compare.py) both read it; the measurement is tests/notebooks/measure_spread.py, recorded in
tests/notebooks/spread.csv."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class Tolerance:
    """|test - reference| <= atol + rtol * |reference|: absolute near zero, relative elsewhere."""

    atol: float
    rtol: float

    def allows(self, test: float, reference: float, slack: float = 0.0) -> bool:
        """Whether two finite numbers agree (`slack`: extra room, e.g. the rounding of printed digits)."""
        if math.isnan(test) or math.isnan(reference) or math.isinf(test) or math.isinf(reference):
            return test == reference or (math.isnan(test) and math.isnan(reference))
        return abs(test - reference) <= self.atol + self.rtol * abs(reference) + slack


# Per quantity of results.csv, matched on "chapter:name" (first match wins). Each bound is five times the largest
# difference that tests/notebooks/spread.csv records for the quantities it covers, rounded up; the comment names it.
RESULTS_TOLERANCES: tuple[tuple[str, Tolerance], ...] = (
    # Sobol' shifts: variance ratios of a few sampled cases, the noisiest numbers of the audit (1.4e-4)
    (r"validity:.*\.sobol_shift\..*", Tolerance(atol=1e-3, rtol=0.0)),
    # probability mass on the answer words and the competence gaps near 1 (3.3e-5), markedness' means near 1 (1.9e-5)
    (r"(decision_tasks|similarity):.*(answer_mass|competence)", Tolerance(atol=2e-4, rtol=0.0)),
    (r"markedness:.*", Tolerance(atol=1e-4, rtol=0.0)),
    # the steering scale k, tens to hundreds (relative 4.3e-6)
    (r"steering_vectors:.*\.k", Tolerance(atol=0.0, rtol=3e-5)),
    # everything else: slopes, gaps, correlations, spans, CKA, framing effects (3.3e-6)
    (r".*", Tolerance(atol=2e-5, rtol=0.0)),
)
def results_tolerance(chapter: str, name: str) -> Tolerance:
    """The tolerance of one results row's real numbers."""
    key = f"{chapter}:{name}"
    return next(tol for pattern, tol in RESULTS_TOLERANCES if re.fullmatch(pattern, key))
