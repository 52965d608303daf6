"""The engines that answer the model layer's requests, as objects: each says what it can answer (`Capability`) and
answers it; `choose` picks one per model, once, when the model loads."""

from llmaudit.models.engines.base import Capability, Engine, NotAnswerable
from llmaudit.models.engines.choice import choose

__all__ = ["Capability", "Engine", "NotAnswerable", "choose"]
