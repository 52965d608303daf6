"""Template-Based Probes Are Imperfect Lenses, §3.4's reading of a sampled answer: the first case-insensitive match
of "negative", "neutral" or "positive" is the label; an answer with none is unparsable, and the paper draws its label
uniformly at random (`with_fallback`, the default: `unparsable: random_label`); ours leaves it out of the rates
(`unparsable: left_out`). Either way the unparsable share is counted and shown."""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from llmaudit.chapters.markedness.metrics import LABELS

_LABEL = re.compile("|".join(LABELS), re.IGNORECASE)


def parse_label(answer: str) -> str | None:
    """The first label word in `answer` (any case, even inside a longer word, as an exact substring match finds
    it), or None when there is none."""
    found = _LABEL.search(answer)
    return found.group(0).lower() if found else None


def with_fallback(labels: Sequence[str | float | None], seed: int) -> list[str]:
    """The labels with each unparsable one (None, or NaN as a table holds it) replaced by a label drawn uniformly
    with `seed`, the paper's fallback; the draws follow the order of the unparsable answers."""
    rng = np.random.default_rng(seed)
    return [label if isinstance(label, str) else str(rng.choice(LABELS)) for label in labels]
