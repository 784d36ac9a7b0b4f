"""Helpers for the config-check tests: run the real CLI in a subprocess."""

from __future__ import annotations

import subprocess
import sys


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    """`python -m hangwatch config-check ARGS...`, captured, never raising on exit codes."""
    return subprocess.run(
        [sys.executable, "-m", "hangwatch", "config-check", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
