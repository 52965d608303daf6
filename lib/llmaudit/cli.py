"""Command line: `llmaudit audit MODEL` runs one model's audit; `llmaudit check-data` verifies the data mirror."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from llmaudit.errors import AuditError


def main(argv: list[str] | None = None) -> int:
    """Entry point; bad input ends with one line on stderr and exit status 2."""
    parser = argparse.ArgumentParser(prog="llmaudit", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    audit = commands.add_parser("audit", help="run every chapter of a model's params file and build its report")
    audit.add_argument("model", help="a name in params/ (e.g. smollm2-135m-instruct) or a path to a params YAML")
    audit.add_argument("--reports", type=Path, default=None, help="output root (default: reports/)")
    audit.add_argument("--chapter", action="append", help="run only this chapter (repeatable)")
    check = commands.add_parser("check-data", help="verify every data file of the manifest against a mirror")
    check.add_argument("mirror", nargs="?", default=None, help="mirror folder (default: $LLMAUDIT_DATA)")
    args = parser.parse_args(argv)
    try:
        if args.command == "audit":
            from llmaudit.audit import run_audit

            kwargs = {"reports": args.reports} if args.reports else {}
            print(run_audit(args.model, chapters=args.chapter, **kwargs))
        else:
            from llmaudit.data import verify_all

            problems = verify_all(args.mirror)
            print("\n".join(problems) or "all data files verified")
            return 1 if problems else 0
    except AuditError as err:
        print(f"llmaudit: error: {err}", file=sys.stderr)
        return 2
    except OSError as err:  # the disk's failures no read site turned into an AuditError: full, read-only, vanished
        where = f"{err.filename}: " if err.filename else ""
        print(f"llmaudit: error: {where}{err.strerror or err}: check the path, its permissions and free space",
              file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
