"""Similarity between models on BBQ (paper 003): answer histograms and their cosine, UNK flip, linear CKA.

Decisions:
- A model's BBQ result is its per-question frame (the `load_bbq` columns plus `pred`); its histogram is the share
  of biased / counter-biased / unknown answers within each context (each context sums to 1, so both contexts weigh
  the same in the cosine). Questions without a target are left out, as in `bias_scores`.
- UNK flip counts every committed answer of the base model, paper 003's "biased answers (stereotypical or
  anti-stereotypical)" (section 3, UNK Flip); `stereotyped_only=True` is the variant that counts only its
  stereotyped (bias-consistent) answers. Both frames are matched on (category, example_id); restrict them to one
  context first for a per-context rate.
- Linear CKA = ||Y^T X||_F^2 / (||X^T X||_F ||Y^T Y||_F) on column-centred float64 features, or the equal Gram
  form <XX^T, YY^T>_F / (||XX^T||_F ||YY^T||_F), whichever costs fewer multiplications for the shapes given.
"""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd

from llmaudit.chapters.similarity.bbq import CONTEXTS, KINDS, answer_kind
from llmaudit.errors import AuditError

KEY = ["category", "example_id"]


def answer_histogram(frame: pd.DataFrame) -> pd.Series:
    """Share of each answer kind within each context, indexed by (context, kind); 6 entries."""
    rows = frame.assign(kind=answer_kind(frame).astype(object)).dropna(subset=["kind"])
    shares = {}
    for context, kind in itertools.product(CONTEXTS, KINDS):
        answered = rows.loc[rows["context_condition"] == context, "kind"]
        shares[(context, kind)] = float((answered == kind).mean()) if len(answered) else 0.0  # absent context: 0
    return pd.Series(shares).rename_axis(["context", "kind"])


def histogram_cosine(a: pd.Series, b: pd.Series) -> float:
    """Cosine similarity of two histograms, aligned on their labels (a label one lacks counts 0)."""
    a, b = a.align(b, fill_value=0.0)
    norm = float(np.linalg.norm(a) * np.linalg.norm(b))
    if norm == 0.0:
        raise AuditError("cannot compare an empty histogram (all zeros)")
    return float(a @ b) / norm


def unk_flip(base: pd.DataFrame, tuned: pd.DataFrame, stereotyped_only: bool = False) -> float:
    """Share of the base model's committed (stereotypical or anti-stereotypical) answers that the tuned model answers
    Unknown on the same questions; `stereotyped_only` counts only the base model's stereotyped answers."""
    pair = base.assign(kind=answer_kind(base))[[*KEY, "kind"]].merge(
        tuned.assign(kind=answer_kind(tuned))[[*KEY, "kind"]], on=KEY, suffixes=("_base", "_tuned"), validate="1:1"
    )
    if len(pair) != len(base):
        raise AuditError(f"tuned results lack {len(base) - len(pair)} of the base model's questions: run the same set")
    flagged = ["biased"] if stereotyped_only else ["biased", "counter_biased"]
    committed = pair[pair["kind_base"].isin(flagged)]
    return float((committed["kind_tuned"] == "unknown").mean()) if len(committed) else float("nan")


def _centred(x: np.ndarray) -> np.ndarray:
    """A 2-D float64 copy of `x` with each column's mean removed."""
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 2:
        raise AuditError(f"CKA needs 2-D representations (prompts x features), got shape {x.shape}")
    return x - x.mean(axis=0)


def linear_cka(x: np.ndarray, y: np.ndarray) -> float:
    """Linear CKA between two representations of the same prompts (rows); widths may differ. 1 = same geometry."""
    x, y = _centred(x), _centred(y)
    n, dx, dy = x.shape[0], x.shape[1], y.shape[1]
    if y.shape[0] != n or n < 2:
        raise AuditError(f"CKA needs the same >= 2 prompts in both: got {n} and {y.shape[0]} rows")
    if dx * dy + dx * dx + dy * dy <= n * (dx + dy):  # feature form: n(dx dy + dx^2 + dy^2) vs Gram: n^2 (dx + dy)
        cross, self_x, self_y = np.sum((y.T @ x) ** 2), np.linalg.norm(x.T @ x), np.linalg.norm(y.T @ y)
    else:
        gram_x, gram_y = x @ x.T, y @ y.T
        cross, self_x, self_y = np.sum(gram_x * gram_y), np.linalg.norm(gram_x), np.linalg.norm(gram_y)
    if self_x == 0.0 or self_y == 0.0:
        raise AuditError("CKA is undefined for a constant representation (every prompt maps to the same vector)")
    return float(cross / (self_x * self_y))


def similarity_matrix(results: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """Pairwise cosine similarity of the models' answer histograms (models x models, symmetric, diagonal 1)."""
    hists = {name: answer_histogram(frame) for name, frame in results.items()}
    names = list(hists)
    return pd.DataFrame(
        [[histogram_cosine(hists[a], hists[b]) for b in names] for a in names], index=names, columns=names
    )


def shared_answers(a: pd.DataFrame, b: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The two systems' answers restricted to the questions both answered, in one order."""
    keys = a[KEY].merge(b[KEY], on=KEY)
    return a.merge(keys, on=KEY), b.merge(keys, on=KEY)


def unk_flip_matrix(answers: pd.DataFrame) -> pd.DataFrame:
    """UNK flip for every ordered pair of systems (rows: base, columns: compared), on their shared questions."""
    systems = {name: part for name, part in answers.groupby("system", sort=False)}
    return pd.DataFrame(
        {b: {a: unk_flip(*shared_answers(systems[a], systems[b])) for a in systems} for b in systems}
    ).rename_axis(index="base", columns="compared")


Reps = dict[str, tuple[pd.DataFrame, np.ndarray]]  # 'system|depth' -> (question order, representations in it)


def _gram(x: np.ndarray) -> np.ndarray:
    """The Gram matrix of `x`'s column-centred rows, scaled to Frobenius norm 1: linear CKA is the inner product of
    two of them."""
    x = _centred(x)
    gram = x @ x.T
    norm = np.linalg.norm(gram)
    if norm == 0.0:
        raise AuditError("CKA is undefined for a constant representation (every prompt maps to the same vector)")
    return gram / norm


class Grams:
    """Linear CKA between saved representations on the questions each pair shares, each representation's Gram
    matrix on a question set computed once: every block's CKA against every block's would otherwise compute each
    Gram once per pair."""

    def __init__(self, reps: Reps) -> None:
        self.reps = reps
        self._found: dict[tuple[str, bytes], np.ndarray] = {}

    def cka(self, a: str, b: str) -> float:
        """Linear CKA of the representations keyed `a` and `b` on their shared questions (NaN with fewer than 2)."""
        (order_a, _), (order_b, _) = self._rows(a), self._rows(b)
        rows = order_a.reset_index().merge(order_b.reset_index(), on=KEY, suffixes=("_a", "_b")).sort_values(KEY)
        if len(rows) < 2:  # systems that answered different question sets have nothing to compare
            return float("nan")
        # in the questions' own order, so a representation meets its Gram matrix of a question set in any pair
        return float(np.sum(self._gram(a, rows["index_a"].to_numpy()) * self._gram(b, rows["index_b"].to_numpy())))

    def _gram(self, key: str, index: np.ndarray) -> np.ndarray:
        """The normalised Gram matrix of one representation's rows `index`, computed on first use."""
        ident = (key, index.astype(np.int64).tobytes())
        if ident not in self._found:
            self._found[ident] = _gram(np.asarray(self.reps[key][1])[index])
        return self._found[ident]

    def _rows(self, key: str) -> tuple[pd.DataFrame, np.ndarray]:
        """One saved representation by its 'system|depth' key; a missing key is a one-line error."""
        if key not in self.reps:
            raise AuditError(f"no saved representation {key!r}: rerun that system's similarity chapter with this "
                             "depth")
        return self.reps[key]


def depths_of(reps: Reps, system: str) -> list[float]:
    """The relative depths saved for one system, in increasing order."""
    return sorted(float(key.rsplit("|", 1)[1]) for key in reps if key.rsplit("|", 1)[0] == system)


def cka_matrix(reps: Reps, depth: float, grams: Grams | None = None) -> pd.DataFrame:
    """Linear CKA between every pair of systems' representations at one relative depth, on their shared
    questions (`grams`: Gram matrices already computed for `reps`)."""
    grams = grams or Grams(reps)
    found = {key.rsplit("|", 1)[0]: key for key in reps if float(key.rsplit("|", 1)[1]) == depth}
    table = {(a, b): grams.cka(found[a], found[b]) for a in found for b in found}
    return pd.Series(table).unstack().loc[list(found), list(found)]


def cka_across_depths(reps: Reps, a: str, b: str, grams: Grams | None = None) -> pd.DataFrame:
    """Linear CKA between every saved depth of system `a` (rows) and every saved depth of system `b` (columns), on
    their shared questions: the layer-by-layer matrix that paper 003 (§3, CKA) summarises by its diagonal and by
    the whole matrix (`cka_summary`). Depths are relative (0 = first block, 1 = last), so models of different depth
    meet at the same share of their stack."""
    grams = grams or Grams(reps)
    rows, columns = depths_of(reps, a), depths_of(reps, b)
    if not rows or not columns:
        raise AuditError(f"no saved representations of {a if not rows else b!r}: run its similarity chapter")
    return pd.DataFrame([[grams.cka(f"{a}|{r:g}", f"{b}|{c:g}") for c in columns] for r in rows],
                        index=pd.Index(rows, name=a), columns=pd.Index(columns, name=b))


def cka_summary(matrix: pd.DataFrame) -> dict[str, float]:
    """Paper 003's two summaries of a cross-depth CKA matrix: the mean over matching relative depths ("diagonal")
    and the mean over every pair of depths ("full matrix")."""
    values = matrix.to_numpy(dtype=float)
    matching = [matrix.loc[d, d] for d in matrix.index if d in matrix.columns]
    return {"diagonal": float(np.nanmean(matching)) if matching else float("nan"),
            "full": float(np.nanmean(values)) if np.isfinite(values).any() else float("nan")}
