"""Real hangwatch processes: `run_hangwatch`, a command run to its end (the CLI tests'
one way to run it); the `hangwatch sidecar` command line, and what a running process
costs, from /proc: CPU seconds and peak resident memory (`SidecarCost` sums them up
against the sidecar's targets); `running`, whether a process a test started is still
there; `command_lines` and `parent_pids`, every running process's arguments and parent.

Shared by the benchmarks that run and measure a real sidecar process (detection, real
clients, probing cost), the real-client harness and the tests that start one.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path


def run_hangwatch(
    *args: str, timeout: float | None, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """`python -m hangwatch ARGS...` (this interpreter's install) run to its end within
    `timeout` seconds, in `env` (None: this process's): its output captured as text, its
    exit code returned, never raised."""
    return subprocess.run(
        [sys.executable, "-m", "hangwatch", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        check=False,
    )


def sidecar_command(
    bootstrap: str, topics: str, telemetry_dir: Path, *options: str, port: int = 0
) -> list[str]:
    """`hangwatch sidecar` (this interpreter's install) probing `bootstrap` for `topics`,
    serving on `port` (0: any free port, announced in its log) and reading
    `telemetry_dir`, with `options` (more flags) added."""
    return [
        *(sys.executable, "-m", "hangwatch", "sidecar", "--bootstrap", bootstrap),
        *("--topics", topics, "--port", str(port), "--telemetry-dir", str(telemetry_dir)),
        *options,
    ]


def _each_process(name: str) -> dict[int, bytes]:
    """/proc/<pid>/`name` of every running process, by pid; a process that ends while
    being read is left out."""
    found = {}
    for path in Path("/proc").glob(f"[0-9]*/{name}"):
        try:
            found[int(path.parent.name)] = path.read_bytes()
        except OSError:
            continue
    return found


def command_lines() -> dict[int, list[str]]:
    """Every running process's command line (its arguments) by pid, from /proc."""
    return {
        pid: raw.decode(errors="replace").split("\0")[:-1]
        for pid, raw in _each_process("cmdline").items()
    }


def parent_pids() -> dict[int, int]:
    """Every running process's parent's pid by pid, from /proc (the stat line's field
    after the command's name and the state)."""
    return {
        pid: int(raw.decode(errors="replace").rsplit(")", 1)[1].split()[1])
        for pid, raw in _each_process("stat").items()
    }


def running(pid: int) -> bool:
    """Process `pid` exists and is not a zombie (exited, not yet reaped: gone too), as its
    /proc/<pid>/stat says."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of process `pid` so far, in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def peak_rss_mb(pid: int) -> float:
    """Peak resident set size of process `pid` (VmHWM), in MB; NaN when unknown."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


class SidecarCost:
    """What a sidecar process costs from this object's creation on: CPU share of one core
    and peak RSS, against the targets (under 2 % of one core, under 80 MB)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self._cpu0, self._t0 = cpu_seconds(pid), time.monotonic()

    def elapsed_seconds(self) -> float:
        return time.monotonic() - self._t0

    def summary(self) -> str:
        """One line: CPU share since creation and peak RSS (read while the process runs)."""
        share = (cpu_seconds(self.pid) - self._cpu0) / self.elapsed_seconds() * 100
        return (
            f"sidecar CPU {share:.2f} % of one core (target < 2 %), "
            f"peak RSS {peak_rss_mb(self.pid):.1f} MB (target < 80 MB)"
        )
