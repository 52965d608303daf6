"""Where each verdict test's evidence sits in the report: the chapter table and figure that show its score (per
chapter and kind of test, by the labels the book gives them), its case group in "Cases behind the gaps" and its page
of every case; a link is made only to a target the report holds."""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from llmaudit.report.anchors import cases_id
from llmaudit.report.markdown import Numbers

# per (chapter, test kind): the labels of the table and the figure that show such tests' scores
SHOWN_IN = {
    ("decision_tasks", "invariance"): ("tab-tasks-verdicts", "fig-tasks-gaps"),
    ("decision_tasks", "dependence"): ("tab-tasks-dependence", "fig-tasks-gaps"),
    ("robustness", "invariance"): ("tab-robustness-alternative-vectors", "fig-robustness-alternative-vectors"),
    ("markedness", "invariance"): ("tab-markedness-white-intervals", "fig-markedness-gaps"),
}


def evidence_links(results: pd.DataFrame, verdicts: pd.DataFrame, numbers: Numbers, chapters: Mapping[str, str],
                   cases_html: str, case_pages: Mapping[str, str] | None = None) -> dict[str, list[tuple[str, str]]]:
    """Per verdict test name, its (text, href) links: 'Table 2.1', 'Figure 2.1', its chapter ('chapter') when neither
    is in the page, 'cases' where the cases section holds its group and 'all cases' where `case_pages` (test name ->
    page path) has its page of every case. `chapters`: chapter key -> section id."""
    chapter_of = dict(zip(results["name"], results["chapter"], strict=True))
    found: dict[str, list[tuple[str, str]]] = {}
    for t in verdicts.itertuples(index=False):
        chapter = chapter_of.get(t.name, "")
        links = []
        for label in SHOWN_IN.get((chapter, t.kind), ()):
            if label in numbers:
                kind, number = numbers[label]
                links.append((f"{kind.capitalize()} {number}", f"#{kind}-{label}"))
        if not links and chapter in chapters:
            links.append(("chapter", f"#{chapters[chapter]}"))
        if f'id="{cases_id(t.name)}"' in cases_html:
            links.append(("cases", f"#{cases_id(t.name)}"))
        if t.name in (case_pages or {}):
            links.append(("all cases", (case_pages or {})[t.name]))
        found[t.name] = links
    return found
