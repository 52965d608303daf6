"""The compute ledger of an audited model: per chapter, the token-blocks its last computing run ran against the
minimum its results need (llmaudit.ledger), and the audit's total; with --calls, each chapter's calls too, largest
excess (actual - minimum) first, with their wall seconds and rate (thousands of token-blocks per
second). Read from reports/<model>/ledger/.
Usage: python benchmarks/ledger.py [REPORT_DIR] [--calls]   (default reports/smollm2-135m-instruct)"""

from __future__ import annotations

import sys
from pathlib import Path

from llmaudit.ledger import read_calls, read_ledgers


def row(name: str, actual: int, minimum: int, indent: str = "", seconds: float | None = None) -> str:
    """One line of the table: counts and their ratio, and, given the wall seconds, those and the rate."""
    ratio = actual / minimum if minimum else float("nan")
    timed = f" {seconds:9.1f} {actual / seconds / 1e3:9.1f}" if seconds else ""
    return f"{indent + name:40s} {actual:14,d} {minimum:14,d} {ratio:10.2f}{timed}"


def main(report_dir: Path, calls: bool) -> int:
    ledgers = read_ledgers(report_dir)
    if not ledgers:
        print(f"no ledger in {report_dir}: run the audit (a run from a warm cache computes, and records, nothing)")
        return 1
    per_call = read_calls(report_dir) if calls else {}
    timed = f" {'seconds':>9s} {'k/s':>9s}" if calls else ""
    print(f"{'chapter':40s} {'actual':>14s} {'minimum':>14s} {'actual/min':>10s}{timed}   token-blocks")
    for name, totals in ledgers.items():
        chapter_calls = per_call.get(name, {})
        print(row(name, totals["actual"], totals["minimum"], seconds=sum(c["seconds"] for c in chapter_calls.values())))
        for label, c in sorted(chapter_calls.items(), key=lambda lc: lc[1]["minimum"] - lc[1]["actual"]):
            print(row(label, int(c["actual"]), int(c["minimum"]), "  ", c["seconds"]))
    print(row("audit", sum(t["actual"] for t in ledgers.values()), sum(t["minimum"] for t in ledgers.values())))
    return 0


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--calls"]
    sys.exit(main(Path(args[0]) if args else Path("reports/smollm2-135m-instruct"), "--calls" in sys.argv[1:]))
