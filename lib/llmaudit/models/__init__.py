"""Model loading and the batched, steerable forward primitive."""

from llmaudit.models.loading.load import load_model
from llmaudit.models.passes.batching import ForwardOutput
from llmaudit.models.runtime import AuditModel

__all__ = ["AuditModel", "ForwardOutput", "load_model"]
