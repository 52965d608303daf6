"""The paper-size audit's time on a GPU, projected per chapter: a ledger of the paper-size profile (token-blocks per
chapter and call label, `llmaudit.ledger`) scaled to the 8B model's blocks, divided by the rate each engine reached in
the GPU check (`benchmarks/gpu_check.py`'s JSON, token-blocks per second of the 8B shape on that card). The ledger is
the plan `llmaudit audit --dry-run` writes (NAME.plan.json: the profile's own sizes, counted without running the
model, sampled answers at their greatest length, so an upper bound there) or a recorded run's report folder (the
scale test's, at its reduced sizes).

Scaling: a token-block is one token through one decoder block, and every engine runs a call's tokens through the same
share of the model's blocks whatever its depth (a steering layer and the blocks read are set as shares of the depth
by the profile), so a call's token-blocks scale by 32 / the stand-in's blocks (the ledger's `blocks`); the tokens
themselves (the default model's tokenizer in both) do not change. A call label's engine is the part before its colon
("sweep: ..." holds a sweep's exact derivative too, which the sweep's rate times); a label of an engine the check did
not time takes the slowest engine's rate. A rate the check measured on one chapter's workload ("sample@markedness":
long prompts, three sampled tokens) is that chapter's; the others take the engine's.
Usage: python benchmarks/projection.py LEDGER GPU_CHECK_JSON [--blocks 32]   (LEDGER: a plan or a report folder)"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path

from llmaudit.ledger import read_calls, read_ledgers

TARGET_BLOCKS = 32  # Llama-3.1-8B's decoder blocks


@dataclass(frozen=True)
class Projected:
    """One chapter's projected seconds on the card, per engine, and the token-blocks they run at the target depth."""

    chapter: str
    seconds: dict[str, float]
    token_blocks: dict[str, float]

    @property
    def total(self) -> float:
        """The chapter's projected seconds."""
        return sum(self.seconds.values())


def engine_of(label: str) -> str:
    """A ledger call label's engine: the text before its colon ("sweep: framing steered" -> "sweep")."""
    return label.split(":", 1)[0].strip()


def project(calls: dict[str, dict[str, dict[str, float]]], blocks: dict[str, int], rates: dict[str, float],
            target_blocks: int = TARGET_BLOCKS) -> list[Projected]:
    """Per chapter of `calls` (chapter -> call label -> {"actual", ...}, recorded with `blocks[chapter]` decoder
    blocks), its token-blocks at `target_blocks` per engine and their seconds at `rates` (engine -> token-blocks per
    second, "engine@chapter" for a rate measured on that chapter's own workload, which that chapter takes; an engine
    without a rate at the slowest one)."""
    if not rates or min(rates.values()) <= 0:
        raise ValueError("every engine's rate must be a positive number of token-blocks per second")
    slowest = min(rates.values())
    out = []
    for chapter, labels in calls.items():
        scaled: dict[str, float] = {}
        for label, counts in labels.items():
            engine = engine_of(label)
            scaled[engine] = scaled.get(engine, 0.0) + counts["actual"] * target_blocks / blocks[chapter]
        out.append(Projected(chapter, {e: n / rates.get(f"{e}@{chapter}", rates.get(e, slowest))
                                       for e, n in scaled.items()}, scaled))
    return out


def read_source(source: Path) -> tuple[dict[str, dict[str, dict[str, float]]], dict[str, dict[str, int]]]:
    """Per chapter its counts per call label and its totals ({"blocks", "actual", "minimum"}), from a plan (a file:
    `llmaudit audit --dry-run`'s JSON) or a report folder's saved ledgers."""
    if source.is_file():
        chapters = json.loads(source.read_text(encoding="utf-8"))["chapters"]
        return ({c: t["calls"] for c, t in chapters.items() if t.get("calls")},
                {c: {k: t[k] for k in ("blocks", "actual", "minimum")} for c, t in chapters.items() if t})
    return read_calls(source), read_ledgers(source)


def rates_of(check: dict) -> dict[str, float]:
    """Engine -> token-blocks per second from the GPU check's JSON."""
    return {engine: float(numbers["token_blocks_per_s"]) for engine, numbers in check["engines"].items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("ledger", type=Path, help="a plan (llmaudit audit --dry-run's NAME.plan.json) or a report "
                        "folder holding ledger/<chapter>.json")
    parser.add_argument("gpu_check", type=Path, help="the GPU check's JSON (benchmarks/results/...)")
    parser.add_argument("--blocks", type=int, default=TARGET_BLOCKS, help="decoder blocks of the audited model")
    args = parser.parse_args(argv)
    try:
        calls, totals = read_source(args.ledger)
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as err:
        print(f"cannot read the plan {args.ledger} ({err}): give the JSON llmaudit audit --dry-run wrote",
              file=sys.stderr)
        return 2
    if not calls:
        print(f"no ledger with call labels in {args.ledger}: plan the audit (llmaudit audit PARAMS --dry-run) or run "
              "the scale test (make scale-test) and give its report folder", file=sys.stderr)
        return 2
    try:
        check = json.loads(args.gpu_check.read_text(encoding="utf-8"))
        rates = rates_of(check)
        projected = project(calls, {c: t["blocks"] for c, t in totals.items()}, rates, args.blocks)
    except (OSError, ValueError, KeyError, TypeError) as err:
        print(f"cannot read the GPU check's rates from {args.gpu_check} ({err}): give the JSON "
              "benchmarks/gpu_check.py wrote", file=sys.stderr)
        return 2
    print(f"projected on {check.get('device', 'the checked card')} at {args.blocks} blocks (seconds)")
    engines = sorted({e for p in projected for e in p.seconds})
    print(f"{'chapter':20s}" + "".join(f"{e:>12s}" for e in engines) + f"{'total':>12s}{'actual/min':>12s}")
    for p in projected:
        ratio = totals[p.chapter]["actual"] / max(totals[p.chapter]["minimum"], 1)
        print(f"{p.chapter:20s}" + "".join(f"{p.seconds.get(e, 0.0):12.1f}" for e in engines) + f"{p.total:12.1f}"
              f"{ratio:12.2f}")
    total = sum(p.total for p in projected)
    print(f"{'audit':20s}" + " " * 12 * len(engines) + f"{total:12.1f}   ({total / 60:.1f} min: the engines' calls, "
          "not the chapters' code between them)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
