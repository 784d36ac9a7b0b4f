"""The producer package's version: the distribution's (its pyproject reads it) and the
`wrapper.version` every telemetry document carries."""

__version__ = "0.1.0"
