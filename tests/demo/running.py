"""Runs the real `hangwatch demo` command for the demo tests (not a test module)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from hangwatch_lab import netfilter


def run_demo(
    *scenarios: str, keep: Path, timeout_seconds: float = 280
) -> tuple[dict[str, dict[str, Any]], int]:
    """The scenarios' rows by name and the demo's pid; asserts exit 0 and that no kernel
    rule of the demo's is left behind."""
    args = [a for name in scenarios for a in ("--scenario", name)]
    with subprocess.Popen(
        [sys.executable, "-m", "hangwatch", "demo", *args, "--json", "--keep", str(keep)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as proc:
        out, err = proc.communicate(timeout=timeout_seconds)
    assert proc.returncode == 0, err[-3000:]
    assert netfilter.list_chains(proc.pid) == [], "the demo left kernel rules behind"
    return {r["scenario"]: r for r in json.loads(out)["scenarios"]}, proc.pid
