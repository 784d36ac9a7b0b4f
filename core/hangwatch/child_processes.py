"""How every hangwatch side ends a child process it started: one definition of the
SIGTERM-then-SIGKILL stop shared by the demo, the lab, the benchmarks and the tests."""

from __future__ import annotations

import subprocess
from typing import Any


def stop_process(proc: subprocess.Popen[Any], grace_seconds: float = 5.0) -> None:
    """SIGTERM (a workload flushes and checkpoints, a sidecar closes its server, a broker
    shuts down in order), SIGKILL after `grace_seconds`; returns once it is reaped."""
    if proc.poll() is None:
        proc.terminate()
    try:
        proc.wait(timeout=grace_seconds)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
