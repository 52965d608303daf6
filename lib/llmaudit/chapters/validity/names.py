"""Name perturbation (main paper §5.1): SSA first names with their female share p_f, binned
into the paper's 11 bins, inserted into credit profiles in place of the gender line; and the implicit bias
score over the names outside an interval of p_f (the paper's "not (a, b)" filters of Table 3)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from llmaudit.chapters.decision_tasks import credit
from llmaudit.chapters.decision_tasks.base import TaskItem
from llmaudit.data import read_csv
from llmaudit.errors import AuditError
from llmaudit.records import case_records
from llmaudit.stats import Estimate, bootstrap_mean

SSA_KEY = "llm-steering-audit/eval_data/ssa-names.csv"
BINS = tuple(round(0.1 * i, 1) for i in range(11))
FILTERS = ((0.0, 1.0), (0.1, 0.9), (0.2, 0.8), (0.3, 0.7), (0.4, 0.6))  # not (a, b): p_f <= a or p_f >= b


def female_bin(p_f: pd.Series | np.ndarray) -> np.ndarray:
    """floor(10 p_f) / 10: eleven bins 0.0 ... 1.0, the last holding only p_f = 1 (rounding guards 0.3 -> 0.29...)."""
    return np.floor(np.round(10 * np.asarray(p_f, dtype=float), 9)) / 10


def ssa_names(mirror: Path | None = None, min_births: int = 2500) -> pd.DataFrame:
    """Names with at least `min_births` registered births: name, births, p_f = female births / all births, bin."""
    table = read_csv(SSA_KEY, mirror)
    births = table["F"] + table["M"]
    names = pd.DataFrame({"name": table["name"], "births": births, "p_f": table["F"] / births})
    names = names[names["births"] >= min_births].reset_index(drop=True)
    if names.empty:
        raise AuditError(f"no SSA name has {min_births} births or more: lower validity.min_births")
    names["bin"] = female_bin(names["p_f"])
    return names


def sample_per_bin(names: pd.DataFrame, per_bin: int | None, seed: int) -> pd.DataFrame:
    """Up to `per_bin` names of each bin (all when None), seeded, in the table's order."""
    if per_bin is None:
        return names
    rng = np.random.default_rng(seed)
    keep = [idx for _, group in names.groupby("bin") for idx in
            rng.choice(group.index, size=min(per_bin, len(group)), replace=False)]
    return names.loc[sorted(keep)]


def credit_items(profiles: list[TaskItem], names: pd.DataFrame, seed: int) -> list[TaskItem]:
    """Each credit profile once per bin with a name drawn from that bin (seeded per profile) and no gender line;
    `group` is the bin, `meta` adds the name and its p_f."""
    by_bin = {b: group.reset_index(drop=True) for b, group in names.groupby("bin")}
    missing = [b for b in BINS if b not in by_bin]
    if missing:
        raise AuditError(f"no name in p_f bins {missing}: lower validity.min_births")
    items = []
    for item in profiles:
        rng = np.random.default_rng([seed, int(item.case)])
        profile = {k: v for k, v in item.meta.items() if k != "name"}
        for b in BINS:
            row = by_bin[b].iloc[int(rng.integers(len(by_bin[b])))]
            meta = {**profile, "name": row["name"], "p_f": float(row["p_f"])}
            items.append(TaskItem(credit.prompt(profile, name=row["name"]), item.prefix, f"{b:.1f}", item.case,
                                  item.target, meta))
    return items


def unnamed_items(profiles: list[TaskItem]) -> list[TaskItem]:
    """The baseline: each profile with neither a gender line nor a name (the paper's empty set)."""
    return [TaskItem(credit.prompt({k: v for k, v in item.meta.items() if k != "name"}), item.prefix, "", item.case,
                     item.target, item.meta) for item in profiles]


def _sides(frame: pd.DataFrame, a: float, b: float) -> tuple[pd.DataFrame, pd.Series]:
    """The rows whose name has p_f <= a or p_f >= b, labelled female (p_f > 0.5) or male (p_f < 0.5), and per
    profile that has both sides the mean metric of its female-majority names minus its male-majority ones."""
    kept = frame[(frame["p_f"] <= a) | (frame["p_f"] >= b)]
    side = np.where(kept["p_f"] < 0.5, "male", None)  # type: ignore[call-overload]  # numpy's stubs reject None
    kept = kept.assign(side=np.where(kept["p_f"] > 0.5, "female", side))
    means = kept.groupby(["case", "side"])["metric"].mean().unstack().reindex(columns=["female", "male"])
    return kept, (means["female"] - means["male"]).dropna()


def filtered_gap(frame: pd.DataFrame, a: float, b: float, n_boot: int, seed: int) -> tuple[Estimate | None, int]:
    """Implicit bias over names with p_f <= a or p_f >= b: per profile, mean metric of its female-majority names
    minus its male-majority ones, with a bootstrap over profiles (None when fewer than 2 profiles have both);
    also how many profiles had both. frame: case, p_f, metric."""
    gaps = _sides(frame, a, b)[1].to_numpy()
    return (bootstrap_mean(gaps, n_boot, seed) if len(gaps) >= 2 else None), len(gaps)


def filtered_cases(frame: pd.DataFrame, a: float, b: float, test: str) -> pd.DataFrame:
    """Case records (unit: the profile) of `filtered_gap`: each kept named prompt with its side (female or male
    majority) as the group, its name and p_f, and its profile's gap as the value (null for a profile with one side).
    frame: case, p_f, name, metric, mass, prompt."""
    kept, gaps = _sides(frame, a, b)
    kept = kept[kept["side"].notna()]
    return case_records(kept, test, gaps, group=kept["side"], extra=("name", "p_f"))
