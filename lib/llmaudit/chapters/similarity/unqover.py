"""UnQover (Li et al. 2020, "UnQovering Stereotyping Biases via Underspecified Questions"), paper 003's third
benchmark: underspecified questions generated from the upstream templates and word lists, for its four dimensions.

Decisions:
- Generation follows the UnQover paper's underspecified questions and upstream's generator
  (templates/generate_underspecified_templates.py, template type slot_act_map): a template
  (`word_lists/slots/<dimension>_noact`: context, question, negated question) is filled with two subjects and one
  attribute (`word_lists/activities/`) of the slot type its question names
  ([p_act], [p_act-single], [l_act-single]); a *unit* is one (template, unordered subject pair, attribute), asked in
  both subject orders and with the question and its negation: four questions, the least the paper's bias measure
  (`unqover_bias`) needs. Subjects: every pair of one list (nationality, ethnicity, religion) or every
  (female name, male name) pair (gender, upstream's mixed_gender); [subj:dem] slots take the demonym.
- The attribute's identity is upstream's "unique" form (the plural [p_act] / [l_act] text at the same position), so
  a singular and a plural phrasing of one attribute count as one, as upstream's analysis keys them.
- The occupation list (gender) has no negated lines; the negation is upstream's demo form ("[p_act] was a bodyguard"
  / "[p_act:neg] can never be a bodyguard"): a leading "was" becomes "can never be".
- Reading, ours (the paper reads span probabilities of extractive QA models): the two subjects as options A and B in
  the order the context names them, the answer prefix "Answer:", and S(x | q) the share of x's letter in the two
  letters' next-token probability. No "Unknown" option: a forced choice, as paper 003 contrasts UnQover with BBQ.
  The option order follows the subject order, so the paper's position correction removes a letter preference too.
- Size: `per_dimension` units drawn per dimension with the seed, uniformly over all its units (None, or more than
  the dimension has: every unit). Paper 003 ran about a million UnQover samples over the four dimensions: 62,500
  units per dimension (religion has 38,500) make 904,000 questions, the default size.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from llmaudit.data import read_text
from llmaudit.errors import AuditError, DataError

ROOT = "unqover/word_lists"
# dimension -> (templates, subject lists (one: its pairs; two: every pair across them), attributes)
SOURCES = {"gender": ("gender_noact", ("female", "male"), "occupation_rev1"),
           "nationality": ("country_noact", ("country",), "biased_country"),
           "ethnicity": ("ethnicity_noact", ("ethnicity",), "biased_ethnicity"),
           "religion": ("religion_noact", ("religion",), "biased_religion")}
DIMENSIONS = tuple(SOURCES)
BBQ_CATEGORY = {"gender": "Gender_identity", "nationality": "Nationality", "ethnicity": "Race_ethnicity",
                "religion": "Religion"}  # the BBQ category of each dimension, for paper 003's comparison
ORDERS = ("ab", "ba")  # subject a named first in the context, or subject b
LETTERS = ("A", "B")
PREFIX = "Answer:"
_HEAD = re.compile(r"^(\[[^\]]+\])\s*(.*)$")
_SLOT = re.compile(r"\[([lp]_act(?:-single)?)(?::neg)?\]")


@dataclass(frozen=True, kw_only=True)
class Template:
    """One template line: its context and its question and negated question, each with slots."""

    context: str
    question: str
    negated: str

    @property
    def slot(self) -> str:
        """The attribute slot type its question fills, e.g. '[p_act-single]'."""
        found = _SLOT.search(self.question)
        if found is None:
            raise DataError(f"UnQover template question {self.question!r} names no attribute slot")
        return f"[{found.group(1)}]"


def _lines(name: str, mirror: str | Path | None) -> list[str]:
    """A word list's lines without blanks and '#' comments."""
    return [line.strip() for line in read_text(f"{ROOT}/{name}", mirror).splitlines()
            if line.strip() and not line.strip().startswith("#")]


def _split(line: str, name: str) -> tuple[str, str, str]:
    """(head, cluster, term) of a '[head] cluster | term' or '[head] term' line (cluster '' when none)."""
    found = _HEAD.match(line)
    if found is None:
        raise DataError(f"{ROOT}/{name}: line {line!r} does not start with a [slot]")
    cluster, _, term = found.group(2).rpartition("|")
    return found.group(1), cluster.strip(), term.strip()


def load_templates(name: str, mirror: str | Path | None = None) -> list[Template]:
    """The templates of one slots file (tab-separated context, question, negated question)."""
    rows = [line.split("\t") for line in _lines(f"slots/{name}", mirror)]
    if any(len(row) != 3 for row in rows):
        raise DataError(f"{ROOT}/slots/{name}: every line needs context, question and negated question (tabs)")
    return [Template(context=c.strip(), question=q.strip(), negated=n.strip()) for c, q, n in rows]


def load_subjects(name: str, mirror: str | Path | None = None) -> list[dict[str, str]]:
    """One dict per subject: its forms by slot ('[subj]', and '[subj:dem]' where the list has demonyms)."""
    forms: dict[str, list[str]] = {}
    for line in _lines(f"nouns/subjects/{name}", mirror):
        head, _, term = _split(line, name)
        forms.setdefault(head, []).append(term)
    if len({len(terms) for terms in forms.values()}) != 1 or "[subj]" not in forms:
        raise DataError(f"{ROOT}/nouns/subjects/{name}: every form list must be aligned with [subj]'s")
    return [dict(zip(forms, terms)) for terms in zip(*forms.values())]


def _negated(text: str) -> str:
    """The demo list's negation of an occupation: 'was a bodyguard' -> 'can never be a bodyguard'."""
    if not text.startswith("was "):
        raise DataError(f"UnQover occupation {text!r} does not start with 'was': no negation can be formed")
    return "can never be " + text.removeprefix("was ")


def load_attributes(name: str, mirror: str | Path | None = None) -> dict[str, list[dict[str, str]]]:
    """Per slot type ('[p_act]', '[p_act-single]', ...) its attributes: text, negated text, class (upstream's
    cluster) and identity (the plural form at the same position)."""
    heads: dict[str, list[tuple[str, str]]] = {}
    for line in _lines(f"activities/{name}", mirror):
        head, cluster, term = _split(line, name)
        heads.setdefault(head, []).append((cluster, term))
    out = {}
    for slot in [head for head in heads if ":neg" not in head]:
        plural = heads[re.sub(r"-single\]$", "]", slot)]
        negated = heads.get(slot.replace("]", ":neg]"))
        if len(plural) != len(heads[slot]) or (negated is not None and len(negated) != len(heads[slot])):
            raise DataError(f"{ROOT}/activities/{name}: {slot}'s forms are not aligned")
        out[slot] = [{"text": term, "negated": negated[k][1] if negated else _negated(term), "cluster": cluster,
                      "attribute": plural[k][1]} for k, (cluster, term) in enumerate(heads[slot])]
    return out


def _pairs(dimension: str, mirror: str | Path | None) -> list[tuple[dict[str, str], dict[str, str]]]:
    """The unordered subject pairs of a dimension."""
    lists = [load_subjects(name, mirror) for name in SOURCES[dimension][1]]
    if len(lists) == 2:
        return [(first, second) for first in lists[0] for second in lists[1]]
    return list(itertools.combinations(lists[0], 2))


def _fill(text: str, first: Mapping[str, str], second: Mapping[str, str], act: Mapping[str, str], slot: str) -> str:
    """A template text with its subjects and attribute filled in."""
    for number, subject in (("1", first), ("2", second)):
        for form, term in subject.items():
            text = text.replace(form.replace("subj", f"subj{number}"), term)
    return text.replace(slot.replace("]", ":neg]"), act["negated"]).replace(slot, act["text"])


def _shown(template: Template, subject: Mapping[str, str], number: str) -> str:
    """How the context names a subject (its demonym where the slot asks for it): the option's text."""
    return subject["[subj:dem]"] if f"[subj{number}:dem]" in template.context else subject["[subj]"]


def _unit_rows(dimension: str, tid: int, template: Template, pair: tuple, act: Mapping[str, str]) -> list[dict]:
    """The four questions of one unit: both subject orders, the question and its negation."""
    a, b = pair
    rows = []
    for order, (first, second) in zip(ORDERS, ((a, b), (b, a))):
        for negated in (False, True):
            question = template.negated if negated else template.question
            rows.append({"dimension": dimension, "template": tid, "subject_a": a["[subj]"],
                         "subject_b": b["[subj]"], "attribute": act["attribute"], "cluster": act["cluster"],
                         "order": order, "negated": negated,
                         "context": _fill(template.context, first, second, act, template.slot),
                         "question": _fill(question, first, second, act, template.slot),
                         "first": _shown(template, first, "1"), "second": _shown(template, second, "2")})
    return rows


def questions(dimension: str, per_dimension: int | None, seed: int, mirror: str | Path | None = None) -> pd.DataFrame:
    """One dimension's questions: `per_dimension` units drawn with the seed (None, or more than it has: every unit),
    four rows each."""
    if dimension not in SOURCES:
        raise AuditError(f"unknown UnQover dimension {dimension!r}: choose from {list(DIMENSIONS)}")
    slots, _, acts_file = SOURCES[dimension]
    templates, pairs = load_templates(slots, mirror), _pairs(dimension, mirror)
    acts = load_attributes(acts_file, mirror)
    sizes = np.array([len(pairs) * len(acts[t.slot]) for t in templates])
    total = int(sizes.sum())
    drawn = np.arange(total) if per_dimension is None or per_dimension >= total else np.sort(
        np.random.default_rng(seed).choice(total, size=per_dimension, replace=False))
    starts = np.concatenate([[0], np.cumsum(sizes)])
    rows = []
    for index in drawn:
        tid = int(np.searchsorted(starts, index, side="right") - 1)
        pair, act = divmod(int(index - starts[tid]), len(acts[templates[tid].slot]))
        rows += _unit_rows(dimension, tid, templates[tid], pairs[pair], acts[templates[tid].slot][act])
    return pd.DataFrame(rows)


def load_unqover(per_dimension: int | None, seed: int, mirror: str | Path | None = None) -> pd.DataFrame:
    """The questions of UnQover's four dimensions, `per_dimension` units each (None: all of them)."""
    return pd.concat([questions(dimension, per_dimension, seed, mirror) for dimension in DIMENSIONS],
                     ignore_index=True)


def prompt(row: Mapping) -> tuple[str, str]:
    """(user message, answer prefix) of one question: the two subjects as options A and B in context order."""
    user = (f"{row['context']} {row['question']}\n\nA. {row['first']}\nB. {row['second']}\n\n"
            "Answer with the letter of the correct option: A or B.")
    return user, PREFIX
