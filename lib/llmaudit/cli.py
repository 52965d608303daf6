"""Command line: `llmaudit audit MODEL` runs one model's audit from its params file (`llmaudit audit --model
HUB_ID_OR_FOLDER`: at a shipped profile's sizes, without one; with `--endpoint URL`, the model served there);
`llmaudit verdict REPORT_DIR` prints its verdicts and exits 0 (every requirement passes), 1 (some fails) or 3 (none
fails, some inconclusive or not measurable); `llmaudit compare A B` compares two audited models test by test on the
cases both drew; `llmaudit standin SHAPE FOLDER` builds a random-weight stand-in model and a params file that audits
it at a profile's sizes; `llmaudit check-data` verifies the data mirror. Bad input exits 2 and an internal error 4,
each with one line on stderr."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from llmaudit.atomic import write_atomic
from llmaudit.errors import AuditError
from llmaudit.paths import REPO
from llmaudit.terminal import clipped, printable

if TYPE_CHECKING:
    from llmaudit.config import ParamsFile

REPO_REPORTS = REPO / "reports"  # the default output root, as the audit's (`runner.audit`)
INTERNAL = 4  # exit status of an uncaught exception (1 and 3: verdicts, 2: bad input)
INTERRUPTED = 130  # exit status after Ctrl-C (SIGINT), as a shell reports it: 128 + the signal's number


def main(argv: list[str] | None = None) -> int:
    """Entry point; bad input ends with one line on stderr and exit status 2, any other failure with one line and
    exit status 4."""
    parser = argparse.ArgumentParser(prog="llmaudit", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    audit = commands.add_parser("audit", help="run every chapter of a model's params file and build its report")
    audit.add_argument("params", nargs="?", metavar="MODEL",
                       help="a name in params/ (e.g. smollm2-135m-instruct) or a path to a params YAML")
    audit.add_argument("--model", default=None, metavar="HUB_ID_OR_FOLDER",
                       help="audit this model without a params file: a hub id (Qwen/Qwen3-8B) or a local model folder")
    audit.add_argument("--profile", default=None, help="with --model: the sizes and settings, paper, default or ci "
                       "(default: default)")
    audit.add_argument("--device", default=None, help="with --model: cpu or cuda (default: the profile's)")
    audit.add_argument("--name", default=None, help="with --model: the report folder's name (default: the model "
                       "folder's name, or the hub id with / as __)")
    audit.add_argument("--set", action="append", default=None, metavar="KEY=VALUE", dest="settings",
                       help="with --model: one params setting, e.g. model.chat_template=false (repeatable)")
    audit.add_argument("--reports", type=Path, default=None, help="output root (default: reports/)")
    audit.add_argument("--chapter", action="append", help="run only this chapter (repeatable)")
    audit.add_argument("--endpoint", default=None, metavar="URL", help="with --model: query the model at this "
                       "OpenAI-compatible server (vLLM, SGLang, llama.cpp, an API); --model is its name there")
    audit.add_argument("--route", default=None, choices=["completions", "chat"], help="with --endpoint: "
                       "completions (default: prompts rendered in the model's template by --tokenizer) or chat "
                       "(messages to /v1/chat/completions, the server's template; no tokenizer needed)")
    audit.add_argument("--api-key-env", default=None, metavar="VAR", help="with --endpoint: the environment variable "
                       "holding the API key (never written anywhere)")
    audit.add_argument("--tokenizer", default=None, metavar="HUB_ID_OR_FOLDER", help="with --endpoint: where the "
                       "model's tokenizer and chat template come from (default: --model)")
    audit.add_argument("--offline", action="store_true", help="with --endpoint: rebuild the chapters and report "
                       "from the request ledger (requests/), asking the server nothing")
    audit.add_argument("--dry-run", action="store_true", help="print the plan per chapter (engine calls, "
                       "token-blocks; an endpoint's requests and tokens) and stop, writing only REPORTS/NAME.plan.json")
    audit.add_argument("--price-per-mtok", type=float, default=None, metavar="USD", help="with --dry-run: the price "
                       "per million tokens, for an endpoint's cost")
    verdict = commands.add_parser("verdict", help="print an audited model's verdicts; the exit status gates CI")
    verdict.add_argument("report_dir", type=Path, help="the report folder of an audit (reports/<model>)")
    verdict.add_argument("--junit", type=Path, default=None, help="also write the verdicts as JUnit XML to this file")
    compare = commands.add_parser("compare", help="compare two audited models test by test on their shared cases")
    compare.add_argument("a", help="model A: a report folder name under the reports root (e.g. smollm2-135m-instruct)")
    compare.add_argument("b", help="model B: another report folder name")
    compare.add_argument("--reports", type=Path, default=None, help="reports root (default: reports/)")
    compare.add_argument("--epsilon", type=float, default=None,
                         help="one threshold for every test, in [0, 1) (default: the two model cards' margins, "
                              "which must agree and be one number)")
    standin = commands.add_parser("standin", help="build a random-weight stand-in model and a params file to audit it")
    standin.add_argument("shape", help="the stand-in's shape: tiny (a CPU test at paper sizes) or llama-3.1-8b")
    standin.add_argument("folder", type=Path, help="where to write the model")
    standin.add_argument("--params", default="llama-3.1-8b-instruct", help="the params file to audit it with")
    standin.add_argument("--out", type=Path, default=None, help="the stand-in's params file (default: FOLDER.yaml)")
    standin.add_argument("--device", default="cpu", choices=["cpu", "cuda"], help="where to build and run it")
    check = commands.add_parser("check-data", help="verify every data file of the manifest against a mirror")
    check.add_argument("mirror", nargs="?", default=None, help="mirror folder (default: $LLMAUDIT_DATA)")
    args = parser.parse_args(argv)
    try:
        if args.command == "audit":
            print(printable(_audit(args)))
        elif args.command == "verdict":
            from llmaudit.report import gate

            table = gate.load_verdicts(args.report_dir)
            print(gate.text(table))
            if args.junit:
                write_atomic(args.junit, gate.junit(table, args.report_dir.resolve().name))
            return gate.exit_status(table)
        elif args.command == "compare":
            from llmaudit.report import comparison
            from llmaudit.report.comparison_files import write_comparison
            from llmaudit.report.index import build_index

            reports = args.reports if args.reports is not None else comparison.DEFAULT_REPORTS
            result = comparison.compare_models(reports, args.a, args.b, args.epsilon)
            paths = write_comparison(reports, result)
            index = build_index(reports)
            print(comparison.text(result))
            print("\n".join(f"wrote {printable(path)}" for path in (*paths, index)))
        elif args.command == "standin":
            import yaml

            from llmaudit.config import standin_params
            from llmaudit.models.loading.standin import SHAPES, build

            if args.shape not in SHAPES:
                raise AuditError(f"unknown stand-in shape '{args.shape}' (known: {', '.join(SHAPES)})")
            folder = build(args.shape, args.folder, device=args.device)
            out = args.out or args.folder.with_suffix(".yaml")
            params = standin_params(args.params, folder, SHAPES[args.shape]["dtype"], args.device)
            write_atomic(out, yaml.safe_dump(params, sort_keys=False))
            print(f"wrote {folder} and {out}: audit it with python -m llmaudit audit {out}")
        else:
            from llmaudit.data import verify_all

            problems = verify_all(args.mirror)
            print("\n".join(problems) or "all data files verified")
            return 1 if problems else 0
    except AuditError as err:
        print(f"llmaudit: error: {printable(err)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("llmaudit: interrupted: a chapter cut short keeps its previous rows; rerun the command to go on (forward "
              "passes already made are cached)", file=sys.stderr)
        return INTERRUPTED
    except OSError as err:  # the disk's failures no read site turned into an AuditError: full, read-only, vanished
        where = f"{clipped(err.filename)}: " if err.filename else ""
        print(f"llmaudit: error: {printable(where)}{printable(err.strerror or err)}: check the path, its permissions "
              "and free space", file=sys.stderr)
        return 2
    except Exception as err:  # a bug of llmaudit's or a library's: one line still, told apart from bad input
        print(f"llmaudit: internal error: {type(err).__name__}: {printable(' '.join(str(err).split()))} (please "
              "report it with the command line)", file=sys.stderr)
        return INTERNAL
    return 0


def _audit(args: argparse.Namespace) -> Path:
    """The `audit` command: a params name or file as given, or `--model` at a shipped profile's sizes."""
    kwargs = {"reports": args.reports} if args.reports else {}
    if (args.params is None) == (args.model is None):
        raise AuditError("give a params name or file (llmaudit audit NAME) or a model (llmaudit audit --model "
                         "HUB_ID_OR_FOLDER), one of the two")
    if args.price_per_mtok is not None and (not args.dry_run or args.price_per_mtok < 0):
        raise AuditError("--price-per-mtok goes with --dry-run and is a non-negative price per million tokens")
    if args.model is None and (args.profile or args.device or args.name or args.settings or args.endpoint
                               or args.offline):
        raise AuditError("--profile, --device, --name, --set, --endpoint and --offline go with --model: a params "
                         "file sets them itself")
    if args.model is not None and args.endpoint is None and (args.api_key_env or args.tokenizer or args.offline
                                                             or args.route):
        raise AuditError("--api-key-env, --tokenizer, --route and --offline go with --endpoint URL")
    if args.dry_run and args.offline:
        raise AuditError("--dry-run plans an audit and asks nothing: leave --offline out")
    from llmaudit.runner.adhoc import Served, adhoc_run, audit_model

    served = None if args.endpoint is None else Served(args.endpoint, args.api_key_env, args.tokenizer,
                                                      args.route or "completions")
    if args.dry_run:
        return _plan(args, kwargs.get("reports", REPO_REPORTS), None if args.model is None else adhoc_run(
            args.model, profile=args.profile or "default", device=args.device, name=args.name,
            settings=args.settings or (), served=served, **kwargs))
    if args.model is None:
        from llmaudit.runner.audit import run_audit

        return run_audit(args.params, chapters=args.chapter, **kwargs)
    return audit_model(args.model, profile=args.profile or "default", device=args.device, name=args.name,
                       settings=args.settings or (), chapters=args.chapter, served=served, offline=args.offline,
                       **kwargs)


def _plan(args: argparse.Namespace, reports: Path, run: ParamsFile | None) -> Path:
    """`audit --dry-run`: print the plan (`runner.plan`) of a params file's audit, or of `run` (`--model`'s params,
    served at `--endpoint` or not), and say where it is written."""
    from llmaudit.runner.audit import _params
    from llmaudit.runner.plan import plan_audit, plan_table

    run = _params(args.params) if run is None else run
    planned = plan_audit(run, reports=reports, chapters=args.chapter)
    print(plan_table(planned, endpoint=run.params.model.endpoint is not None, price=args.price_per_mtok))
    return Path(reports) / f"{run.params.name}.plan.json"


if __name__ == "__main__":
    sys.exit(main())
