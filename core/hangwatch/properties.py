"""Client properties given on the command line as repeated `-X key=value` arguments.

Shared by `hangwatch probe`, `hangwatch sidecar`, `hangwatch config-check` and the
test and demo producers (`add_properties_argument` declares the argument). A
malformed argument is named by its position and never echoed: it may be a secret
typed without its key.
"""

from __future__ import annotations

import argparse
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


def add_properties_argument(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup,
    dest: str,
    help: str,
    metavar: str = "KEY=VALUE",
) -> None:
    """The repeatable `-X KEY=VALUE` argument, collected in `dest` as a list of strings
    (read with `parse_assignments`)."""
    parser.add_argument("-X", dest=dest, action="append", default=[], metavar=metavar, help=help)
