"""The verdict page as a CI gate: the verdict table of an audited model as text, an exit status a pipeline can
branch on, and JUnit XML (one test case per verdict test) that CI systems display. Read from the report folder
alone, like the verdict page."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pandas as pd

from llmaudit.errors import AuditError
from llmaudit.formats import estimate, signed
from llmaudit.formats import interval as bounds
from llmaudit.report.card import CARD, read_json
from llmaudit.report.results import Results
from llmaudit.terminal import printable
from llmaudit.verdict.verdicts import NOT_MEASURABLE, from_card, overall

# Exit statuses: every requirement passes; some requirement fails; none fails but some is inconclusive or not
# measurable (2 is taken by bad input).
PASSED, FAILED, UNDECIDED = 0, 1, 3


def load_verdicts(report_dir: Path) -> pd.DataFrame:
    """The verdict table of one audited model's report folder (its results.csv and model card)."""
    results, card = report_dir / "results.csv", report_dir / CARD
    for path in (results, card):
        if not path.is_file():
            raise AuditError(f"{path} not found: give the report folder of an audit (reports/<model>)")
    table = from_card(Results(results).table(), read_json(card))
    if table.empty:
        raise AuditError(f"{results} holds no verdict test: run the audit's decision chapters first")
    return table


def exit_status(table: pd.DataFrame) -> int:
    """FAILED if any requirement fails, else UNDECIDED if any is inconclusive or not measurable, else PASSED."""
    outcomes = set(overall(table))
    return FAILED if "fail" in outcomes else UNDECIDED if outcomes - {"pass"} else PASSED


def text(table: pd.DataFrame) -> str:
    """The verdict table for a terminal: requirement, its overall outcome, then each test's outcome and interval
    (strings from the report folder escaped)."""
    worst = overall(table)
    lines = []
    for requirement, tests in table.groupby("requirement", sort=False):
        lines.append(f"{worst[requirement]:>14}  {printable(requirement)}")
        for t in tests.itertuples(index=False):
            lines.append(f"{t.verdict:>14}    {printable(t.test)}: {estimate(t.score, t.lo, t.hi)}"
                         + (f" ({printable(_reason(t.gates))})" if t.verdict == NOT_MEASURABLE else ""))
    return "\n".join(lines)


def _reason(gates: tuple[str, ...]) -> str:
    """The failed gates' texts (those with a reason after a colon) of one test."""
    return "; ".join(g for g in gates if ": " in g and "not checked" not in g)


def junit(table: pd.DataFrame, model: str) -> str:
    """JUnit XML: one testsuite per requirement, one testcase per test; fail -> <failure>, inconclusive and not
    measurable -> <skipped> with the reason (neither is a pass). Control characters, which XML 1.0 cannot hold even
    as references, are written as escapes, so the file stays well-formed."""
    root = ET.Element("testsuites", name=f"llmaudit {printable(model)}")
    for requirement, tests in table.groupby("requirement", sort=False):
        suite = ET.SubElement(root, "testsuite", name=printable(requirement), tests=str(len(tests)),
                              failures=str(int((tests["verdict"] == "fail").sum())),
                              skipped=str(int(tests["verdict"].isin(["inconclusive", NOT_MEASURABLE]).sum())))
        for t in tests.itertuples(index=False):
            case = ET.SubElement(suite, "testcase", classname=printable(requirement), name=printable(t.test))
            interval = f"score {signed(t.score)}, 95% CI {bounds(t.lo, t.hi)}, epsilon {t.epsilon:g}"
            if t.verdict == "fail":
                ET.SubElement(case, "failure", message=f"interval outside +-epsilon: {interval}")
            elif t.verdict == "inconclusive":
                ET.SubElement(case, "skipped", message=f"inconclusive: {interval}")
            elif t.verdict == NOT_MEASURABLE:
                ET.SubElement(case, "skipped", message=f"not measurable: {printable(_reason(t.gates))}")
    return ET.tostring(root, encoding="unicode", xml_declaration=True)
