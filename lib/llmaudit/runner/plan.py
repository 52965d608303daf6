"""`llmaudit audit --dry-run`: the plan of an audit, every chapter run with the planning engine
(`models.engines.planner`) in a temporary report folder, so that nothing is written but the plan: per chapter the
engine calls, the token-blocks they run and the fewest their results need (sampled answers at their greatest length,
an upper bound) and, for a model behind an endpoint, its requests, prompt and completion tokens and their cost."""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

from llmaudit.atomic import write_atomic
from llmaudit.config import ParamsFile
from llmaudit.environment import exported
from llmaudit.errors import ConfigError
from llmaudit.ledger import ledger_path
from llmaudit.models.engines.planner import PLAN_MEMORY_GIB
from llmaudit.models.loading.planned import PLAN, planned_endpoint
from llmaudit.registry import notebook
from llmaudit.runner.audit import execute_chapter
from llmaudit.runner.snapshot import snapshot


def plan_audit(run: ParamsFile, *, reports: Path, chapters: list[str] | None = None,
               memory_gib: float = PLAN_MEMORY_GIB) -> dict[str, dict]:
    """Each chosen chapter's planned ledger (`ledger.Ledger.totals` with the plan's `plan` part), chapters in order,
    written to reports/<name>.plan.json; nothing else is written. A model behind an endpoint is planned as one whose
    server returns log-probabilities (`loading.planned.planned_endpoint`), its cells kept as its run keeps them."""
    params = run.params
    chosen = chapters or params.chapters
    unlisted = [chapter for chapter in chosen if chapter not in params.chapters]
    if unlisted:
        raise ConfigError(f"--chapter {unlisted[0]}: {run.path.name} does not list it under chapters")
    planned: dict[str, dict] = {}
    can = None if params.model.endpoint is None else planned_endpoint()  # the cells its run keeps (`runner.needs`)
    with tempfile.TemporaryDirectory() as tmp, exported(PLAN, str(memory_gib)):
        report_dir = Path(tmp) / params.name
        ran = snapshot(run, report_dir)
        for i, chapter in enumerate(chosen, start=1):
            print(f"[{i}/{len(chosen)}] planning {chapter}", file=sys.stderr, flush=True)
            execute_chapter(chapter, str(ran), str(report_dir), report_dir / f"{notebook(chapter)}.ipynb",
                            progress=False, can=can)
            path = ledger_path(report_dir, chapter)
            planned[chapter] = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    out = Path(reports) / f"{params.name}.plan.json"
    write_atomic(out, json.dumps({"model": params.name, "endpoint": params.model.endpoint is not None,
                                  "memory_gib": memory_gib, "chapters": planned}, indent=1))
    return planned


def plan_table(planned: dict[str, dict], *, endpoint: bool, price: float | None) -> str:
    """The plan as text: per chapter its engine calls, token-blocks run and needed (a '<=' where sampled answers make
    it an upper bound); for an endpoint, also its requests and tokens and, given a price per million tokens, their
    cost."""
    head = f"{'chapter':18s}{'calls':>8s}{'token-blocks':>16s}{'minimum':>16s}{'ratio':>7s}"
    if endpoint:
        head += f"{'requests':>10s}{'prompt tok':>12s}{'answer tok':>12s}" + (f"{'cost':>10s}" if price else "")
    lines = [head]
    sums = [0, 0, 0, 0, 0, 0]
    for chapter, totals in planned.items():
        plan = totals.get("plan", {})
        calls = sum(plan.get("entered", {}).values())
        bound = "<=" if plan.get("bounded") else ""
        asked = plan.get("requests", {}).values()
        requests, prompt, answer = (sum(a[key] for a in asked) for key in ("requests", "prompt", "completion"))
        actual, minimum = totals.get("actual", 0), totals.get("minimum", 0)
        ratio = f"{actual / minimum:7.2f}" if minimum else f"{'-':>7s}"
        line = f"{chapter:18s}{calls:8d}{bound + format(actual, ','):>16s}{bound + format(minimum, ','):>16s}{ratio}"
        if endpoint:
            line += f"{requests:10,d}{prompt:12,d}{bound + format(answer, ','):>12s}"
            line += f"{(prompt + answer) / 1e6 * price:10.2f}" if price else ""
        lines.append(line)
        for k, value in enumerate((calls, actual, minimum, requests, prompt, answer)):
            sums[k] += value
    calls, actual, minimum, requests, prompt, answer = sums
    total = f"{'audit':18s}{calls:8d}{actual:16,d}{minimum:16,d}" + (f"{actual / minimum:7.2f}" if minimum else "")
    if endpoint:
        total += f"{requests:10,d}{prompt:12,d}{answer:12,d}" + (f"{(prompt + answer) / 1e6 * price:10.2f}"
                                                                  if price else "")
    lines.append(total)
    lines.append("token-blocks: one token through one decoder block, as the fast engines would run them; sampled "
                 "answers counted at their greatest length (<=: an upper bound)")
    return "\n".join(lines)
