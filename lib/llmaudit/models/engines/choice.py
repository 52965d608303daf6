"""The one place an engine is chosen, once per model as it loads: the traced engine for a remote model, the fast
engines for a local family in `architectures.FAST`, else the plain engine (a model behind an endpoint has its own,
`engines.endpoint`, built with the endpoint's probe)."""

from __future__ import annotations

from llmaudit.capabilities import Capability
from llmaudit.models.engines.base import Engine, Parts
from llmaudit.models.engines.fast import FastEngine
from llmaudit.models.engines.plain import PlainEngine
from llmaudit.models.engines.traced import TracedEngine
from llmaudit.models.loading.architectures import FAST


def choose(*, name: str, parts: Parts, remote: bool) -> Engine:
    """The engine that runs model `name` from its `parts`: traced for a remote model, else by its family."""
    if remote:
        return TracedEngine(parts)
    return _local(name, parts)


def can_run(*, remote: bool) -> tuple[str, frozenset[Capability]]:
    """Before the model loads: the engine's name and what every engine a model so placed may get can do (a local
    model's family decides between the fast and the plain engine, which the chapters need alike; an endpoint's
    probe decides what it can do, `runner.needs.capabilities`)."""
    if remote:
        return TracedEngine.name, TracedEngine.capabilities
    return "local", FastEngine.capabilities & PlainEngine.capabilities


def _local(name: str, parts: Parts) -> Engine:
    """The fast engines for a family in `FAST`, else the plain one."""
    model_type = parts.handle.hf.config.model_type
    if model_type in FAST:
        return FastEngine(parts, f"'{model_type}' is verified for the fast engines")
    return PlainEngine(parts, f"'{model_type}' is not in the fast engines' verified table: plain hooked forward",
                       model=name)
