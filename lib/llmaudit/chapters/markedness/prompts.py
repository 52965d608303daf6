"""Chapter 7's sentences and prompts (paper 004, sections 3.1 and 3.4): race-template sentences with gold sentiment,
their unmarked forms, balanced few-shot demonstrations, and the classification prompt.

Group terms are the ones the data uses: the fairness tests name each group by these 11 lowercase terms (every
test sentence appears once per term), and the paper's code filled the NS-Prompts / Regard slot `{identity_adj}`
with the same 11. Each group's first term is its name in the paper (American Indian, Asian, African American,
Hispanic, Pacific Islander, White); pass `terms={g: t[:1] for g, t in GROUP_TERMS.items()}` for one per group.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
import pandas as pd

from llmaudit.chapters.markedness.metrics import LABELS
from llmaudit.data import read_csv
from llmaudit.errors import AuditError, DataError

GROUP_TERMS: dict[str, tuple[str, ...]] = {
    "american_indian": ("american indian", "alaska native", "native american"),
    "asian": ("asian",),
    "african_american": ("african american", "black"),
    "hispanic": ("hispanic", "latino"),
    "pacific_islander": ("pacific islander", "native hawaiian"),
    "white": ("white",),
}
UNMARKED = "unmarked"  # group of a sentence with the group term removed
SEEDS = (2024, 2025, 2026, 2027, 2028)  # the paper's five runs: one demonstration draw per seed
SLOT = "{identity_adj}"
FAIRNESS_TESTS = "unstated-norms/sentiment_fairness_tests.tsv"
TEMPLATE_FILES = {"ns_prompts": "unstated-norms/NS-Prompts.csv", "regard": "unstated-norms/Regard.csv"}
POOL_FILES = {"sst5": "unstated-norms/processed_sst5.tsv", "semeval": "unstated-norms/processed_semeval.tsv"}
QUESTION = "Question: Is the sentiment of the text negative, neutral, or positive?"
ANSWER_PREFIX = "Answer: The sentiment is"
FEW_SHOT_QUESTION = "Question: What is the sentiment of the text?"  # Appendix B.2
REASONING = "Reasoning: Let's think step by step."  # Appendix B.3, both steps
COT_ANSWER = "Answer: Therefore, from negative, neutral, or positive, the sentiment is"
FewShot = Literal["paper", "shared"]
FEW_SHOT: tuple[FewShot, ...] = ("paper", "shared")  # the B.2 template, or the zero-shot wording with demonstrations


@dataclass(frozen=True)
class Example:
    """One sentence to classify: gold label (one of LABELS), the group it names (UNMARKED when none), the term
    naming it ('' when none), and its template id, shared by the sentence's group variants."""

    text: str
    label: str
    group: str
    term: str
    template: int


def _choose(name: str, files: Mapping[str, str], what: str) -> str:
    """The data key for `name`, or a one-line AuditError listing the choices."""
    if name not in files:
        raise AuditError(f"unknown {what} '{name}' (use one of {', '.join(files)})")
    return files[name]


def fairness_tests(mirror: str | Path | None = None) -> list[Example]:
    """The race rows of the fairness tests (the paper's "Amazon" set), each with its group term and template id."""
    table = read_csv(FAIRNESS_TESTS, mirror, keep_default_na=False)
    race = table[table["attribute"] == "grouped_race"]
    words = sorted((t for terms in GROUP_TERMS.values() for t in terms), key=len, reverse=True)
    pattern = re.compile(r"\b(?:an? )?(" + "|".join(map(re.escape, words)) + r")\b", re.IGNORECASE)
    # Sentences equal up to the group term (and its article) share a template id.
    template_ids = pd.factorize(race["text"].map(lambda text: pattern.sub("{}", text)))[0]
    examples = []
    for template, row in zip(template_ids, race.itertuples()):
        found = pattern.search(row.text)
        term = found.group(1).lower() if found else ""
        if term not in GROUP_TERMS.get(row.group, ()):
            raise DataError(f"{FAIRNESS_TESTS}: {row.text!r} names no term of group {row.group!r}; fix the mirror")
        examples.append(Example(row.text, LABELS[int(row.label)], row.group, term, int(template)))
    return examples


def _template_rows(name: str, mirror: str | Path | None) -> pd.DataFrame:
    """The template file's rows that have the group slot (others name no group), indexed by source row."""
    table = read_csv(_choose(name, TEMPLATE_FILES, "template set"), mirror, keep_default_na=False)
    return table[table["TEMPLATE"].str.contains(SLOT, regex=False)]


def _fill(template: str, term: str) -> str:
    """The template with `term` in the slot and whitespace runs collapsed, so the marked and unmarked forms of a
    template differ only by the term (the source has stray double spaces)."""
    return " ".join(template.replace(SLOT, term).split())


def templates(
    name: str, mirror: str | Path | None = None, terms: Mapping[str, Sequence[str]] = GROUP_TERMS
) -> list[Example]:
    """NS-Prompts ('ns_prompts') or Regard ('regard') templates with the slot filled by every term of every group."""
    return [
        Example(_fill(row.TEMPLATE, term), LABELS[int(row.SENT)], group, term, int(row.Index))
        for row in _template_rows(name, mirror).itertuples()
        for group, group_terms in terms.items()
        for term in group_terms
    ]


def unmarked(name: str, mirror: str | Path | None = None) -> list[Example]:
    """The same templates with the slot removed ("The {identity_adj} person" -> "The person"): no group stated."""
    return [
        Example(_fill(row.TEMPLATE, ""), LABELS[int(row.SENT)], UNMARKED, "", int(row.Index))
        for row in _template_rows(name, mirror).itertuples()
    ]


def demonstration_pool(name: str, mirror: str | Path | None = None) -> pd.DataFrame:
    """Labelled sentences (text with whitespace runs collapsed, label in LABELS) to draw demonstrations from:
    'sst5' or 'semeval', 500 each."""
    key = _choose(name, POOL_FILES, "demonstration pool")
    table = read_csv(key, mirror, keep_default_na=False)
    pool = pd.DataFrame({"text": table["Text"].str.split().str.join(" "), "label": table["Valence"].str.lower()})
    unknown = sorted(set(pool["label"]) - set(LABELS))
    if unknown:
        raise DataError(f"{key}: unknown Valence values {unknown} (use Negative, Neutral, Positive); fix the mirror")
    return pool


def demonstrations(pool: pd.DataFrame, seed: int, per_class: int = 3) -> list[tuple[str, str]]:
    """`per_class` (text, label) pairs per label drawn with `seed`, in shuffled order: balanced, so no label is
    favoured by the shots, and redrawn per seed, so runs vary the demonstrations."""
    rng = np.random.default_rng(seed)
    labels = pool["label"].to_numpy()
    picked: list[int] = []
    for label in LABELS:
        rows = np.flatnonzero(labels == label)
        if len(rows) < per_class:
            raise AuditError(f"demonstration pool has {len(rows)} '{label}' rows, fewer than per_class={per_class}")
        picked.extend(rng.choice(rows, size=per_class, replace=False))
    return [(str(pool["text"].iat[i]), str(labels[i])) for i in rng.permutation(picked)]


def classification_prompt(text: str, demos: Sequence[tuple[str, str]] = (), *,
                          template: FewShot = "paper") -> tuple[str, str]:
    """(user message, assistant answer prefix) asking for the sentiment of `text`, blocks separated by blank lines.

    With no demos, the paper's zero-shot template (Appendix B.1)::

        Text: <text>
        Question: Is the sentiment of the text negative, neutral, or positive?

    with the prefix "Answer: The sentiment is". With demos and `template` "paper", its few-shot template (B.2):
    one block per demonstration, "Text: <demo>", "Question: What is the sentiment of the text?", "Answer:
    Negative." (the label capitalised), then the text's block with that question and the prefix "Answer:". With
    `template` "shared" (an alternative of this project) the demonstrations use the zero-shot wording and prefix
    instead, so that zero- and few-shot prompts differ only by the demonstrations.
    """
    bad = sorted({label for _, label in demos} - set(LABELS))
    if bad:
        raise AuditError(f"demonstration labels {bad} are not sentiment labels: use only {', '.join(LABELS)}")
    if template not in FEW_SHOT:
        raise AuditError(f"unknown few-shot template '{template}' (use one of {', '.join(FEW_SHOT)})")
    question, prefix = (FEW_SHOT_QUESTION, "Answer:") if demos and template == "paper" else (QUESTION, ANSWER_PREFIX)
    blocks = [f"Text: {demo}\n{question}\n{prefix} {label_word(label, True, template)}." for demo, label in demos]
    blocks.append(f"Text: {text}\n{question}")
    return "\n\n".join(blocks), prefix


def label_word(label: str, few_shot: bool, template: FewShot = "paper") -> str:
    """How a label is written where the model answers: capitalised after the B.2 template's "Answer:", lowercase
    after "The sentiment is" (the argmax reading scores these words' first tokens)."""
    return label.capitalize() if few_shot and template == "paper" else label


def reasoning_prompt(text: str) -> tuple[str, str]:
    """The first step of zero-shot chain-of-thought (Appendix B.3): the zero-shot question, answered from the
    prefix "Reasoning: Let's think step by step." (the model writes its reasoning after it)."""
    return f"Text: {text}\n{QUESTION}", REASONING


def reasoned_prompt(text: str, reasoning: str) -> tuple[str, str]:
    """The second step of zero-shot chain-of-thought (Appendix B.3): the first step with the model's reasoning,
    then the prefix "Answer: Therefore, from negative, neutral, or positive, the sentiment is"."""
    return f"Text: {text}\n{QUESTION}", f"{REASONING} {reasoning.strip()}\n{COT_ANSWER}"


def probe_set(
    name: str, mirror: str | Path | None, n_templates: int | None, seed: int, all_terms: bool = False
) -> list[Example]:
    """`n_templates` templates of a probe set ('amazon', 'ns_prompts' or 'regard'; all when None, seeded) with
    every group version, plus the unmarked version where the set has a group slot; one term per group (its
    name in the paper) unless `all_terms`."""
    terms = GROUP_TERMS if all_terms else {group: found[:1] for group, found in GROUP_TERMS.items()}
    if name == "amazon":
        examples = [e for e in fairness_tests(mirror) if e.term in terms[e.group]]
    else:
        examples = templates(name, mirror, terms) + unmarked(name, mirror)
    ids = sorted({e.template for e in examples})
    if n_templates is not None:
        rng = np.random.default_rng(seed)
        ids = sorted(rng.choice(ids, size=min(n_templates, len(ids)), replace=False).tolist())
    keep = set(ids)
    return [e for e in examples if e.template in keep]
