"""results.json: the headline numbers of results.csv, the verdicts and the audit's configuration in one document,
shaped after lm-evaluation-harness's results file where it fits (`results`, `config`, `versions`, `n-samples`),
so tools that read one read the other. Schema (README, "results.json"):

- results: {chapter: {name: {value, lo, hi, n, unit, meaning, note, flag}}}: every row of results.csv, value, bounds,
  n and flag null where empty (a yes/no result has a flag and no value);
- verdicts: [{requirement, test, name, verdict, score, lo, hi, epsilon, epsilon_unit, resampled, n, gate, gates, unmet,
  half_width, cases_needed, p_holm, holm, kind}]: the verdict page's rows (name: the test's results-file name; unmet:
  the failed gates, or the unchecked ones, in brief; cases_needed null where no finite number of cases decides the
  test, |S| at or within rounding of epsilon; kind: invariance or dependence, main paper §3.4);
- date: when the model card was written (the audit's end);
- config: the model (source, weights sha256 or revision, dtype, device), params file name, sha256 and text (as the
  run read them at its start), seed, epsilon and gate thresholds, `listed`: the chapters the params list, and
  `chapters`: per chapter the settings its rows came from and where they differ from that params file
  (`report.card.chapter_provenance`);
- versions: llmaudit, the computing code's hash, the git commit, Python and library versions;
- data: the data manifest's sha256 and each data file's sha256;
- n-samples: {chapter: {name: n}} for the rows with an interval over n sampled units;
- task_versions: {chapter: {version, modules: {module: version}, tasks (decision tasks): {task: version}}}: a hash
  of the code that builds each task's prompts and reads its answers (`report.versions`), as lm-evaluation-harness
  gives each task a version: the code that wrote this file, at the audit's end (a chapter whose rows came from an
  earlier run, `config.chapters`, may have run another version).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pandas as pd

from llmaudit.atomic import write_atomic
from llmaudit.report.audited import Audited
from llmaudit.report.versions import task_versions

NAME = "results.json"
FIELDS = ("value", "lo", "hi", "n", "unit", "meaning", "note", "flag")


def _plain(value: Any) -> Any:
    """A JSON-ready scalar: NaN, infinity (JSON has none: an undecidable test's cases_needed) and pandas' missing
    values as null, numpy numbers as Python numbers."""
    if value is None or value is pd.NA or (isinstance(value, float) and not math.isfinite(value)):
        return None
    if hasattr(value, "item"):
        return _plain(value.item())
    return list(value) if isinstance(value, tuple) else value


def results_document(audited: Audited) -> dict[str, Any]:
    """The results.json document of one report folder, from its results.csv and model card as read once."""
    card = audited.card
    results: dict[str, dict[str, Any]] = {}
    samples: dict[str, dict[str, int]] = {}
    for row in () if audited.rows is None else audited.rows.itertuples(index=False):
        results.setdefault(row.chapter, {})[row.name] = {f: _plain(getattr(row, f)) for f in FIELDS}
        if _plain(row.n) is not None:
            samples.setdefault(row.chapter, {})[row.name] = int(row.n)
    params = card.get("params", {})
    return {
        "date": card.get("generated"),
        "results": results,
        "verdicts": [{k: _plain(v) for k, v in r.items() if k != "p_fail"}
                     for r in audited.verdicts.to_dict("records")],
        "config": {"model": card.get("model", {}),
                   **{k: params.get(k) for k in ("name", "file", "sha256", "text", "seed", "epsilon", "gates")},
                   "listed": params.get("chapters", []), "chapters": audited.provenance},
        "versions": card.get("environment", {}),
        "data": card.get("data", {}),
        "n-samples": samples,
        "task_versions": task_versions(),
    }


def write_results_json(audited: Audited) -> Path:
    """Write results.json next to results.csv (rewritten whole on every audit run)."""
    document = results_document(audited)
    return write_atomic(audited.folder / NAME, json.dumps(document, indent=2, allow_nan=False) + "\n")

