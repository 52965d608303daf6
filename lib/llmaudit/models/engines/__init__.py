"""The engines that answer the model layer's requests, as objects: each says what it can answer (`Capability`) and
answers it; `choose` picks one per model, once, when the model loads."""

from llmaudit.capabilities import Capability
from llmaudit.models.engines.base import Engine, NotAnswerable
from llmaudit.models.engines.choice import can_run, choose

__all__ = ["Capability", "Engine", "NotAnswerable", "can_run", "choose"]
