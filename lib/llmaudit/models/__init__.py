"""Model loading and the batched, steerable forward primitive."""

from llmaudit.models.load import load_model
from llmaudit.models.runtime import AuditModel, ForwardOutput

__all__ = ["AuditModel", "ForwardOutput", "load_model"]
