"""Structured logging for every hangwatch component.

Each line is one JSON object on stderr with the time, level, component, message and
the pod/executor identity taken from the environment (set by the downward API in
Kubernetes, by the demo locally), plus any `extra={...}` fields the caller passes.
Values that look like secrets are never passed here: callers log redacted
configuration only (see `hangwatch_producer.secrets`).
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from typing import Any

from hangwatch.errors import UsageError

_STANDARD_ATTRS = frozenset(vars(logging.makeLogRecord({})).keys()) | {"message", "asctime"}

IDENTITY_ENV = {
    "pod": "HANGWATCH_POD_NAME",
    "namespace": "HANGWATCH_POD_NAMESPACE",
    "node": "HANGWATCH_NODE_NAME",
    "executor": "HANGWATCH_EXECUTOR_ID",
}
"""Identity fields added to every line when the environment variable is set."""


class JsonFormatter(logging.Formatter):
    """Formats a record as one JSON line with identity and extra fields."""

    def __init__(self, component: str) -> None:
        super().__init__()
        self.component = component
        self.identity = {k: v for k, env in IDENTITY_ENV.items() if (v := os.environ.get(env))}

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "component": self.component,
            "logger": record.name,
            "msg": record.getMessage(),
            **self.identity,
        }
        for key, value in vars(record).items():
            if key not in _STANDARD_ATTRS and not key.startswith("_"):
                line[key] = value
        if record.exc_info and record.exc_info[0] is not None:
            line["error"] = f"{record.exc_info[0].__name__}: {record.exc_info[1]}"
        return json.dumps(line, default=str, separators=(",", ":"))


def configure(component: str, level: str | int | None = None) -> None:
    """Send all `hangwatch*` logging as JSON lines to stderr; idempotent. A level that is
    not one (`HANGWATCH_LOG_LEVEL=LOUD`) is a `UsageError`."""
    level = level or os.environ.get("HANGWATCH_LOG_LEVEL", "INFO")
    name = level if isinstance(level, int) else level.upper()
    if not isinstance(name, int) and not isinstance(logging.getLevelName(name), int):
        raise UsageError(
            f"HANGWATCH_LOG_LEVEL={level!r} is not a log level (DEBUG, INFO, WARNING, ERROR)"
        )
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter(component))
    root = logging.getLogger()
    for old in list(root.handlers):
        if isinstance(old.formatter, JsonFormatter):
            root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(name)
