"""The model a dry run plans for (`llmaudit audit --dry-run`): its tokenizer and configuration, no weights (the
modules on the meta device, where nothing is allocated or run), answered by the planning engine
(`models.engines.planner`), whose counts go to the model's ledger as a run's would."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from llmaudit.capabilities import Capability
from llmaudit.models.endpoint.modes import Reading
from llmaudit.models.engines.endpoint import reading_capabilities
from llmaudit.models.engines.planner import PlanEngine, PlanLedger
from llmaudit.models.intervention import Intervention
from llmaudit.models.loading.spec import ModelSpec
from llmaudit.models.memory import AUTO
from llmaudit.models.request import Runtime
from llmaudit.models.runtime import AuditModel

PLAN = "LLMAUDIT_PLAN"  # set (to the card's memory in GiB) in a dry run's chapters: load_model plans, runs nothing


def planning() -> float | None:
    """The memory in GiB of the card a dry run plans `batch_tokens: auto` for; None outside a dry run."""
    value = os.environ.get(PLAN)
    return None if value is None else float(value)


class PlannedModel(AuditModel):
    """An AuditModel whose engine plans (`PlanEngine`, as able as `capabilities`) and whose ledger is a `PlanLedger`:
    the transformers modules `hf` on the meta device (also as `lm`: no nnsight wrapper); `batch_tokens: auto` is
    planned for the dry run's card of `memory_gib` when the runtime is bound."""

    def __init__(self, name: str, hf: Any, tokenizer: Any, *, capabilities: frozenset[Capability], memory_gib: float,
                 provenance: dict, system_prompt: str | None, chat_template: bool,
                 template_options: Mapping[str, bool | int | str] | None):
        self.name, self.hf, self.lm, self.device, self.remote = name, hf, hf, "cpu", False
        self.tokenizer, self.provenance = tokenizer, provenance
        self.system_prompt, self.chat_template = system_prompt, chat_template
        self.template_options = dict(template_options or {})
        self.n_layers, self.width = hf.config.num_hidden_layers, hf.config.hidden_size
        if tokenizer.pad_token_id is None:
            tokenizer.pad_token = tokenizer.eos_token
        self.ledger: PlanLedger = PlanLedger(self.n_layers)
        self.engine: PlanEngine = PlanEngine(self, capabilities, memory_gib=memory_gib)
        self.ledger.engine = self.engine.reason
        self.runtime = Runtime()

    @property
    def identity(self) -> dict:
        """The planned model's source and dtype (its placeholder results are cached in the dry run's folder only)."""
        return {"weights": f"planned:{self.provenance.get('source')}", "dtype": str(self.hf.dtype), "device": "plan"}

    def generate(self, text: str, max_new_tokens: int, intervention: Intervention | None = None) -> str:
        """The greedy continuation planned (`PlanEngine.generate`)."""
        return self.engine.generate(text, max_new_tokens, intervention)

    @property
    def runtime(self) -> Runtime:
        return self._runtime

    @runtime.setter
    def runtime(self, runtime: Runtime) -> None:
        engine = getattr(self, "engine", None)
        if isinstance(engine, PlanEngine) and runtime.batch_tokens == AUTO:
            engine.auto = True
            runtime = replace(runtime, batch_tokens=engine.budget(AUTO))
        self._runtime = runtime


def planned_endpoint() -> frozenset[Capability]:
    """What a dry run plans an endpoint's engine to do: what one that reads probabilities can (exact or top-k mode;
    its probe decides when the audit runs, and a sampled-mode server is asked more: its answers per prompt)."""
    return reading_capabilities(Reading(window=1, fingerprint=None))


def load_planned(name: str, spec: ModelSpec, memory_gib: float, *, folder: str, source: dict[str, str | None],
                 dtype: Any) -> AuditModel:
    """The planned model of `spec`: tokenizer and configuration from the model's `folder` (for a model behind an
    endpoint, its tokenizer's; `source`: its provenance), modules of `dtype` on the meta device; an endpoint's model
    planned as able to read probabilities (what its probe decides when it runs). Raises OSError or ValueError where
    the folder holds no configuration or tokenizer."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(folder, trust_remote_code=spec.trust_remote_code)
    config = AutoConfig.from_pretrained(folder, trust_remote_code=spec.trust_remote_code)
    with torch.device("meta"):
        hf = AutoModelForCausalLM.from_config(config, dtype=dtype,
                                              trust_remote_code=spec.trust_remote_code).eval()
    capabilities = planned_endpoint() if spec.endpoint is not None else frozenset(Capability)  # the fast engines': all
    return PlannedModel(name, hf, tokenizer, capabilities=capabilities, memory_gib=memory_gib,
                        provenance={**source, "planned": True}, system_prompt=spec.system_prompt,
                        chat_template=spec.chat_template, template_options=spec.template_options)
