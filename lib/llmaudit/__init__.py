"""llmaudit: audit social bias in language models, black-box (prompts) and white-box (steering vectors)."""

from llmaudit.errors import AuditError, ConfigError, DataError

__all__ = ["AuditError", "ConfigError", "DataError"]
__version__ = "0.1.0"
