"""Model loading and the batched, steerable forward primitive."""

from llmaudit.models.batching import ForwardOutput
from llmaudit.models.load import load_model
from llmaudit.models.runtime import AuditModel

__all__ = ["AuditModel", "ForwardOutput", "load_model"]
