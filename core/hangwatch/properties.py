"""Client properties given on the command line as repeated `-X key=value` arguments.

Shared by `hangwatch probe`, `hangwatch sidecar` and `hangwatch config-check`. A
malformed argument is named by its position and never echoed: it may be a secret
typed without its key.
"""

from __future__ import annotations

from collections.abc import Iterable

from hangwatch.errors import UsageError


def parse_assignments(items: Iterable[str], strip_values: bool = False) -> dict[str, str]:
    """`-X key=value` arguments as a dict, in order (a later one overrides an earlier one)."""
    config: dict[str, str] = {}
    for number, item in enumerate(items, start=1):
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"malformed -X argument #{number} (expected property=value)")
        config[key.strip()] = value.strip() if strip_values else value
    return config
