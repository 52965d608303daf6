"""The default model's audit through llama-cpp-python's OpenAI-compatible server over the packaged GGUF, started here,
then its verdicts against the local audit's (`make audit` writes that): `make audit-llama`. The server computes on
the GGUF's float32 copy, the local engine's weights (`--quantized`: on the packaged Q4_1 file, as it ships). Its port
is fixed (--port), because the request ledger keys each answer on the endpoint: a killed run started again asks
nothing twice. Writes REPORTS/NAME/ (the endpoint audit), REPORTS/NAME/agreement.md and the server's log
REPORTS/NAME.llama-server.log; exits 0 when every test agrees, 1 when not, 2 on bad input."""

from __future__ import annotations

import argparse
from pathlib import Path

from llmaudit.cli import main as llmaudit
from llmaudit.errors import run_script
from llmaudit.models.endpoint.launch import llama_cpp_command, served
from llmaudit.models.loading.embedded import float32_gguf, locate_gguf
from llmaudit.models.loading.standin import DEFAULT_GGUF, tokenizer_folder
from llmaudit.paths import REPO
from llmaudit.runner.agreement import compare_reports, markdown

# llama-cpp-python's server answers one request at a time: concurrent ones only queue there, and a queued request's
# wait counts against its timeout (at 8 at a time on two busy cores, validity's long credit prompts waited past 60 s)
SERVER = ("--set", "model.concurrency=1", "--set", "model.timeout=600")


def main(argv: list[str] | None = None) -> int:
    """Serve, audit, compare; the comparison's exit status."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reports", type=Path, default=REPO / "reports", help="output root (default: reports/)")
    parser.add_argument("--local", type=Path, default=None, help="the local audit's folder, or any holding its "
                        "results.csv (default: REPORTS/smollm2-135m-instruct; at ci sizes tests/notebooks, the "
                        "regression reference)")
    parser.add_argument("--name", default=None, help="the endpoint audit's folder name (default: "
                        "smollm2-135m-instruct-llama-cpp, -q4_1 added with --quantized: llama-cpp-python names no "
                        "build or weights in its replies, so each file served keeps its own request ledger)")
    parser.add_argument("--port", type=int, default=8089, help="the server's port (default 8089)")
    parser.add_argument("--profile", default="default", help="the sizes, as the local audit's (default: default)")
    parser.add_argument("--chapter", action="append", default=None, help="only this chapter (repeatable)")
    parser.add_argument("--quantized", action="store_true", help="serve the packaged Q4_1 file as it ships (default: "
                        "its float32 copy, the local engine's weights; llama.cpp multiplies Q4_1 weights with 8-bit "
                        "activations, which moves a case's answer probability by up to 0.08 here)")
    args = parser.parse_args(argv)
    name = args.name or "smollm2-135m-instruct-llama-cpp" + ("-q4_1" if args.quantized else "")
    gguf = locate_gguf(DEFAULT_GGUF)
    command, health = llama_cpp_command(gguf if args.quantized else float32_gguf(gguf))
    with served(command, health, args.reports / f"{name}.llama-server.log", port=args.port) as url:
        status = llmaudit(["audit", "--model", "smollm2", "--endpoint", url, "--tokenizer", str(tokenizer_folder()),
                           "--profile", args.profile, "--name", name, "--reports", str(args.reports), *SERVER,
                           *(arg for chapter in args.chapter or () for arg in ("--chapter", chapter))])
    if status != 0:
        return status
    table = compare_reports(args.local or args.reports / "smollm2-135m-instruct", args.reports / name)
    text = markdown(table)
    (args.reports / name / "agreement.md").write_text(text, encoding="utf-8")
    print(text, end="")
    return 0 if table["agree"].all() else 1


if __name__ == "__main__":
    run_script(main, "llama_audit")
