"""Runs a build or resolve tool's command (Maven, javac) for the commands that need one.

Kept apart from `hangwatch.errors` so that the pure modules importing the error vocabulary
never import `subprocess` (an import-linter contract says so).
"""

from __future__ import annotations

import subprocess

from hangwatch.errors import UsageError


def run_step(
    command: list[str], *, timeout_seconds: float, step: str, hint: str = ""
) -> subprocess.CompletedProcess[str]:
    """`command` run to completion with its output captured (text); a `UsageError` line
    naming `step` (and `hint`, what to check) when it outlasts `timeout_seconds`. The
    caller judges the exit code: what a failure means is the step's own business."""
    try:
        return subprocess.run(
            command, capture_output=True, text=True, timeout=timeout_seconds, check=False
        )
    except subprocess.TimeoutExpired:
        raise UsageError(
            f"{step} took over {timeout_seconds:.0f} s" + (f": {hint}" if hint else "")
        ) from None
