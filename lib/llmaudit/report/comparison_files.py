"""The files of a comparison (`report.comparison`): reports/compare/<A>+vs+<B>.json and .html, one pair of files
per ordered pair of models, and the list of comparison pages the cross-model index links."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from llmaudit.atomic import write_atomic
from llmaudit.errors import AuditError
from llmaudit.paths import PLAIN_NAME
from llmaudit.reading import read_json
from llmaudit.report.comparison import A_MORE, B_MORE, FOLDER, OUTCOMES, Comparison
from llmaudit.report.comparison_page import to_html

SEPARATOR = "+vs+"  # '+' cannot occur in a report name (`paths.PLAIN_NAME`): no two pairs share a file


def comparison_stem(a: str, b: str) -> str:
    """The file name (without suffix) of the comparison of `a` with `b`: one per ordered pair, since the separator
    cannot occur in a report name ('x_vs_y' and 'z' once shared x_vs_y_vs_z with 'x' and 'y_vs_z'); a name that is
    not a plain report name is a one-line AuditError."""
    for name in (a, b):
        if not PLAIN_NAME.fullmatch(name):
            raise AuditError(f"cannot name a comparison file after {name!r}: compare report folders by their names")
    return f"{a}{SEPARATOR}{b}"


def write_comparison(reports: Path, comparison: Comparison, generated: str | None = None) -> tuple[Path, Path]:
    """Write reports/compare/<A>+vs+<B>.json and .html; returns both paths."""
    stem = Path(reports) / FOLDER / comparison_stem(comparison.a, comparison.b)
    json_path, html_path = stem.with_name(stem.name + ".json"), stem.with_name(stem.name + ".html")
    write_atomic(json_path, json.dumps(comparison.to_json(), indent=2, allow_nan=False) + "\n")
    write_atomic(html_path, to_html(comparison, generated))
    return json_path, html_path


def comparison_pages(reports: Path) -> list[Path]:
    """Every comparison page under reports/compare/, in name order."""
    folder = Path(reports) / FOLDER
    return sorted(p for p in folder.glob("*.html") if p.is_file()) if folder.is_dir() else []


def page_label(page: Path) -> str:
    """'A vs B' and its tests per outcome from the page's JSON twin, or the file name where that is unreadable."""
    try:
        data = read_json(page.with_suffix(".json"), "rerun its comparison")
        counts = pd.Series([t["outcome"] for t in data["tests"]]).value_counts()
        names = {A_MORE: f"{data['a']} more biased", B_MORE: f"{data['b']} more biased"}
        summary = ", ".join(f"{names.get(o, o)}: {counts[o]}" for o in OUTCOMES if o in counts)
        return f"{data['a']} vs {data['b']} ({summary})"
    except (OSError, ValueError, KeyError, TypeError, AuditError):  # a damaged twin: the page is still listed
        return page.stem
