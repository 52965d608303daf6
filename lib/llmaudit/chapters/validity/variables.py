"""The non-protected variables of the credit and admissions cases (main paper Tables 4 and 7) and their
first-order Sobol' indices under each kind of perturbation, from the per-item results of the task runs."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from llmaudit.chapters.decision_tasks.base import TaskItem
from llmaudit.chapters.validity.sobol import first_order_ci

# Every field a credit profile shows except the protected one (sex); ground truth and names are not inputs.
CREDIT = ("checking_status", "duration", "credit_history", "purpose", "credit_amount", "savings",
          "employment_duration", "installment_rate", "marital_status", "other_debtors", "residence_duration",
          "property", "age", "other_payment_plan", "housing", "concurrent_credits", "job", "num_dependents",
          "telephone", "foreign_worker")
ADMISSIONS = ("university", "gpa", "ecs", "letters")
VARIABLES = {"credit": CREDIT, "admissions_gender": ADMISSIONS, "admissions_race": ADMISSIONS}


def case_table(items: Sequence[TaskItem], variables: Sequence[str]) -> pd.DataFrame:
    """One row per case with its variables; numbers given as text (credit durations, amounts, ages) become numbers."""
    rows = {item.case: {name: item.meta[name] for name in variables} for item in items}
    table = pd.DataFrame.from_dict(rows, orient="index").rename_axis("case").reset_index()
    for name in variables:
        numbers = pd.to_numeric(table[name], errors="coerce")
        if numbers.notna().all():
            table[name] = numbers
    return table


def sobol_table(
    results: pd.DataFrame, cases: pd.DataFrame, variables: Sequence[str], *, bins: int | None, n_boot: int, seed: int,
    average_over: str | None = None,
) -> pd.DataFrame:
    """First-order indices (value, lo, hi per variable) of the metric in per-item `results` (case, metric[, lam]),
    each item taking its case's variables; numeric variables in `bins` classes (None: a count growing with cases)."""
    frame = results.merge(cases, on="case", how="left", validate="many_to_one")
    return first_order_ci(frame, variables, "metric", bins=bins, n_boot=n_boot, seed=seed, average_over=average_over)
