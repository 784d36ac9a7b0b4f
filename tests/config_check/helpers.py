"""Helpers for the config-check tests: run the real CLI in a subprocess; parametrize a
model's test over named worst cases."""

from __future__ import annotations

import subprocess

import pytest

from hangwatch_testing.processes import run_hangwatch


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    """`python -m hangwatch config-check ARGS...`, captured, never raising on exit codes."""
    return run_hangwatch("config-check", *args, timeout=60)


def worst_cases(cases: dict[str, tuple[dict[str, str], int, float]]) -> pytest.MarkDecorator:
    """Parametrize a test over `cases`: id -> (settings, broker count, expected worst case
    in seconds), as the arguments `config`, `brokers` and `total_seconds`."""
    return pytest.mark.parametrize(
        ("config", "brokers", "total_seconds"), list(cases.values()), ids=list(cases)
    )
