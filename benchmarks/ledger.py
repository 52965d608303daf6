"""The compute ledger of an audited model: per chapter, the token-blocks its last computing run ran against the
minimum its results need (llmaudit.ledger), and the audit's total. Read from reports/<model>/ledger/.
Usage: python benchmarks/ledger.py [REPORT_DIR]   (default reports/smollm2-135m-instruct)"""

from __future__ import annotations

import sys
from pathlib import Path

from llmaudit.ledger import read_ledgers


def main(report_dir: Path) -> int:
    ledgers = read_ledgers(report_dir)
    if not ledgers:
        print(f"no ledger in {report_dir}: run the audit (a run from a warm cache computes, and records, nothing)")
        return 1
    print(f"{'chapter':20s} {'actual':>14s} {'minimum':>14s} {'actual/min':>10s}   token-blocks")
    for name, totals in [*ledgers.items(), ("audit", {key: sum(t[key] for t in ledgers.values())
                                                      for key in ("actual", "minimum")})]:
        ratio = totals["actual"] / totals["minimum"] if totals["minimum"] else float("nan")
        print(f"{name:20s} {totals['actual']:14,d} {totals['minimum']:14,d} {ratio:10.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path("reports/smollm2-135m-instruct")))
