"""The one exception type the audit raises for bad input: its message is a single line saying what to fix."""


class AuditError(Exception):
    """A user-facing error: bad params, unknown model, missing or corrupt data."""


class DataError(AuditError):
    """A data file is missing, corrupt (sha256 mismatch) or has the wrong columns."""


class ConfigError(AuditError):
    """A params file is malformed or names an unknown key or model."""
