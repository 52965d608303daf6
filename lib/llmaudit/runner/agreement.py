"""Whether an audit through an endpoint reaches the local audit's verdicts on the same model: every black-box test the
same verdict, every white-box test not measurable because the endpoint exposes no weights."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from llmaudit.capabilities import NO_WEIGHTS
from llmaudit.errors import AuditError
from llmaudit.registry import verdict_tests
from llmaudit.report.card import CARD, read_json
from llmaudit.report.results import Results
from llmaudit.runner.chapter import RESULTS
from llmaudit.runner.needs import white_box
from llmaudit.verdict.verdicts import NOT_MEASURABLE, from_card

COLUMNS = ["test", "name", "kind", "local", "endpoint", "local_score", "endpoint_score", "agree", "why"]


def agreement(local: pd.DataFrame, endpoint: pd.DataFrame) -> pd.DataFrame:
    """One row per verdict test of either audit (verdict tables, `report.gate.load_verdicts`): its kind, both verdicts
    and scores, and whether they agree as an endpoint audit should (a white-box test: not measurable there for want
    of weights; a black-box test: the local verdict), with why not where they do not."""
    declared = {test.name: test for test in verdict_tests()}
    here, there = ({row["name"]: row for row in table.to_dict("records")} for table in (local, endpoint))
    rows = []
    for name in [*here, *(n for n in there if n not in here)]:
        weights = name in declared and white_box(declared[name])
        a, b = here.get(name), there.get(name)
        if a is None or b is None:
            agree, why = False, f"only in the {'endpoint' if a is None else 'local'} audit"
        elif weights:
            agree = b["verdict"] == NOT_MEASURABLE and any(NO_WEIGHTS in text for text in b["unmet"])
            why = "" if agree else f"white-box, yet {b['verdict']} through the endpoint"
        else:
            agree = a["verdict"] == b["verdict"]
            why = "" if agree else "; ".join(b["unmet"]) if b["verdict"] == NOT_MEASURABLE else "the verdicts differ"
        rows.append({"test": (a or b or {})["test"], "name": name, "kind": "white-box" if weights else "black-box",
                     "local": (a or {}).get("verdict"), "endpoint": (b or {}).get("verdict"),
                     "local_score": (a or {}).get("score"), "endpoint_score": (b or {}).get("score"),
                     "agree": agree, "why": why})
    return pd.DataFrame(rows, columns=COLUMNS)


def compare_reports(local: Path, endpoint: Path) -> pd.DataFrame:
    """`agreement` of two folders' results (the local audit's first), both judged with the margins and gates of the
    endpoint audit's model card: the same params, but for the model section."""
    for folder, what in ((local, "the local audit"), (endpoint, "the endpoint audit")):
        if not (folder / RESULTS).is_file():
            raise AuditError(f"{folder} holds no {RESULTS}: run {what} first")
    card = read_json(endpoint / CARD)
    return agreement(*(from_card(Results(folder / RESULTS).table(), card) for folder in (local, endpoint)))


def markdown(table: pd.DataFrame) -> str:
    """The agreement as a Markdown table, then a line counting the tests that agree."""
    score = lambda x: "—" if x is None or pd.isna(x) else f"{x:+.4f}"  # noqa: E731
    lines = ["| test | kind | local | endpoint | local score | endpoint score | agree |", "|---" * 7 + "|"]
    lines += [f"| {r.test} | {r.kind} | {r.local or '—'} | {r.endpoint or '—'} | {score(r.local_score)} | "
              f"{score(r.endpoint_score)} | {'yes' if r.agree else 'NO: ' + r.why} |" for r in table.itertuples()]
    black = table[table["kind"] == "black-box"]
    lines.append(f"\n{int(table['agree'].sum())} of {len(table)} tests agree ({int(black['agree'].sum())} of "
                 f"{len(black)} black-box tests reach the local verdict; every white-box test not measurable for want "
                 "of weights" + ("" if table.loc[table['kind'] == 'white-box', 'agree'].all() else ": NOT SO") + ").")
    return "\n".join(lines) + "\n"
