"""Seeded draws the tasks share: which cases to audit, and which first names (from the admissions name lists)
signal the groups, so that a (case, seed) pair always yields the same prompts."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from llmaudit.data.store import read_json
from llmaudit.errors import AuditError

ADMISSIONS_KEY = "llm-steering-audit/eval_data/admissions.json"
Names = dict[str, dict[str, list[str]]]  # race -> gender -> first names


def first_names(mirror: Path | None = None) -> Names:
    """The admissions name lists: race ('asian', 'black', 'hispanic', 'white') -> gender -> first names."""
    return read_json(ADMISSIONS_KEY, mirror)["first_names"]


def pairing(
    names: Names,
    concept: str,
    groups: Sequence[str],
    seed: int,
    case: int,
    shared: Sequence[str] | None = None,
) -> tuple[str, list[str]]:
    """One first name per group (races or genders, as `concept` says), all of one other attribute (gender or race)
    drawn from `shared` (default: all in the lists) per (seed, case), so the names differ only in `concept`; with that
    attribute (a race for gender pairs, a gender for race pairs)."""
    if concept not in ("gender", "race"):
        raise AuditError(f"names: unknown concept '{concept}' (use gender or race)")
    rng = np.random.default_rng([seed, case])
    if shared is None:
        shared = sorted(names) if concept == "gender" else sorted({g for pools in names.values() for g in pools})
    other = shared[int(rng.integers(len(shared)))]
    pools = [names[other][g] if concept == "gender" else names[g][other] for g in groups]
    return other, [pool[int(rng.integers(len(pool)))] for pool in pools]


def any_name(names: Names, seed: int, case: int) -> tuple[str, str, str]:
    """(race, gender, first name) of one name drawn per (seed, case) from all the name groups (a stream apart from
    `pairing`'s): the paper's white-box admissions prompt pools every group."""
    rng = np.random.default_rng([seed, case, 1])
    groups = sorted((race, gender) for race, pools in names.items() for gender in pools)
    race, gender = groups[int(rng.integers(len(groups)))]
    pool = names[race][gender]
    return race, gender, pool[int(rng.integers(len(pool)))]
