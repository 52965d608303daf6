"""A chapter run by an engine that cannot do everything the chapter does (a model behind an endpoint: no weights, and
no log-probabilities where the server returns none): the chapter's cells that need what the engine lacks are left out
before the chapter runs, each with the caption that follows it, and every verdict test the chapter declares but did
not record is recorded not measurable with the reason, per test, as the verdict page and the bottom line read it.
One mechanism for every chapter: a cell declares what it needs by a tag (`NEEDS`), a cell that says what the engine
cannot measure runs only where it cannot (`WITHOUT_WEIGHTS`), and a local audit runs every cell but those."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Collection
from pathlib import Path

import nbformat

from llmaudit.capabilities import NO_LOGPROBS, NO_WEIGHTS, Capability
from llmaudit.models.engines import can_run
from llmaudit.models.loading.load import endpoint_of
from llmaudit.models.loading.spec import ModelSpec
from llmaudit.registry import chapter as chapter_spec
from llmaudit.runner.chapter import Chapter
from llmaudit.spec import VerdictTest

WEIGHTS = frozenset({Capability.STATES, Capability.EDITS})  # what a white-box cell needs of the engine
NEEDS = {"needs-weights": WEIGHTS, "needs-probabilities": frozenset({Capability.PROBABILITIES})}
WITHOUT_WEIGHTS = "without-weights"  # a cell run only where the engine has no weights: what is not measurable
WHITE_BOX_INSTRUMENTS = ("vector",)  # instruments read from the weights: steering vectors
CAPTION = re.compile(r"\A\s*(`{3,})\{(figure|table)-caption\}.*?^\1\s*$\n?", re.DOTALL | re.MULTILINE)


def kept(notebook: nbformat.NotebookNode, can: Collection[Capability]) -> nbformat.NotebookNode:
    """`notebook` with the cells the engine that `can` do these things runs: a cell tagged with a need it lacks is
    left out with the caption right after it; a `WITHOUT_WEIGHTS` cell is kept only where it has no weights."""
    weighted = WEIGHTS <= set(can)
    cells, dropped = [], False
    for cell in notebook.cells:
        tags = set(cell.get("metadata", {}).get("tags", []))
        needs = set().union(*(NEEDS[tag] for tag in tags if tag in NEEDS))
        if not needs <= set(can) or (WITHOUT_WEIGHTS in tags and weighted):
            dropped = cell.cell_type == "code"
            continue
        if dropped and cell.cell_type == "markdown":
            cell.source = CAPTION.sub("", cell.source, count=1)
        dropped = False
        if cell.source.strip():
            cells.append(cell)
    notebook.cells = cells
    return notebook


def white_box(test: VerdictTest) -> bool:
    """Whether a test reads the model's weights: it steers them (a steering vector is its instrument), or its label
    says it is white-box (a dependence test steering a task's own vector)."""
    return test.label.startswith("white-box") or any(kind in WHITE_BOX_INSTRUMENTS for kind, _ in test.instruments)


def reason(test: VerdictTest, can: Collection[Capability]) -> str | None:
    """Why the engine that `can` do these things cannot measure `test` (None: it can do everything)."""
    if white_box(test) and not WEIGHTS <= set(can):
        return NO_WEIGHTS
    return None if Capability.PROBABILITIES in can else NO_LOGPROBS


def capabilities(name: str, model: ModelSpec, requests: Path) -> frozenset[Capability]:
    """What the engine that will run model `name` can do, before any chapter runs: a local or remote model's by its
    placement, an endpoint's by its probe (one request: whether the server returns log-probabilities), recorded in
    the request ledger's folder `requests` (offline: the last probe recorded there)."""
    if model.endpoint is None:
        return can_run(remote=model.remote)[1]
    from llmaudit.models.endpoint.client import OFFLINE, PROBES, Client
    from llmaudit.models.endpoint.ledger import request_key
    from llmaudit.models.endpoint.model import reading_of
    from llmaudit.models.endpoint.routes import ROUTES
    from llmaudit.models.engines.endpoint import reading_capabilities

    client = Client(endpoint_of(name, model))
    body = ROUTES[model.route].probe(client.endpoint.model, model.logprobs)
    exchange = client.complete(body)
    if not os.environ.get(OFFLINE):
        key = request_key(endpoint=client.endpoint.base, model=client.endpoint.model, fingerprint=None, body=body,
                          sample=0)
        requests.mkdir(parents=True, exist_ok=True)
        with (requests / PROBES).open("a", encoding="utf-8") as out:
            out.write(json.dumps({"key": key, **exchange}, sort_keys=True) + "\n")
    return reading_capabilities(reading_of(exchange, model.logprobs))


def record_unmeasured(chapter: Chapter, can: Collection[Capability]) -> None:
    """Record every verdict test `chapter` declares for its params and did not record as not measurable, with the
    reason the engine that `can` do these things cannot measure it (nothing where it can)."""
    recorded = set(chapter.results.table(chapter.name)["name"])
    for test in chapter_spec(chapter.name).verdict_tests(chapter.params):
        why = reason(test, can)
        if why is not None and test.name not in recorded:
            chapter.record(test.name, None, note=why)


def left_out(can: Collection[Capability], *, whole: bool = False) -> str:
    """What a chapter leaves out for an engine that `can` do only these things, in a sentence or two ('' where it
    leaves out nothing); `whole`: the chapter needs the weights throughout, so nothing of it is measured."""
    if WEIGHTS <= set(can) and Capability.PROBABILITIES in can:
        return ""
    if whole:
        return ("Nothing in this chapter is measured for this model: its parts steer or read the model's weights, "
                f"and the endpoint exposes none (its tests {NO_WEIGHTS}).")
    said = ("This model is audited through an endpoint, which exposes no weights: the chapter's white-box parts "
            f"(steering, block outputs, projections) are left out, their tests {NO_WEIGHTS}.")
    if Capability.PROBABILITIES not in can:
        said += (" The server returns no log-probabilities (sampled mode): the parts that read the answer words' "
                 "probabilities are left out too, their tests not measurable for that reason.")
    return said
