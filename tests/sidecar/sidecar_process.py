"""A real `hangwatch sidecar` process for tests: started, read over HTTP, stopped (not a test).

The sidecar listens on a free port it announces in its first log line (`--port 0`);
`/status` and `/metrics` are read with the standard library. Its JSON log is kept in
a file so a failing test can show it.
"""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from hangwatch.child_processes import stop_process
from hangwatch_demo.sidecars import announced_port
from hangwatch_testing.waiting import wait_for


class SidecarProcess:
    """A running sidecar and how to read it."""

    def __init__(self, proc: subprocess.Popen[bytes], log: Path) -> None:
        self.proc, self.log = proc, log
        self.port: int = wait_for(
            lambda: announced_port(log), 60, "the sidecar to announce its port",
            give_up=lambda: proc.poll() is not None, context=self.log_text,
        )  # fmt: skip

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")[-4000:]

    def get(self, path: str) -> bytes:
        url = f"http://127.0.0.1:{self.port}{path}"
        with urllib.request.urlopen(url, timeout=10) as answer:
            body: bytes = answer.read()
        return body

    def status(self) -> dict[str, Any]:
        doc: dict[str, Any] = json.loads(self.get("/status"))
        return doc

    def metric(self, name: str) -> float | None:
        """The value of the first sample of `name` (with or without labels), if any."""
        for line in self.get("/metrics").decode().splitlines():
            if line.startswith(name + " ") or line.startswith(name + "{"):
                return float(line.rsplit(" ", 1)[1])
        return None


@contextmanager
def sidecar_process(tmp: Path, bootstrap: str, *args: str) -> Iterator[SidecarProcess]:
    """A sidecar probing `bootstrap` with fast rounds, an empty telemetry directory and
    `args` added; stopped (SIGTERM, then SIGKILL) on exit."""
    telemetry = tmp / "telemetry"
    telemetry.mkdir(exist_ok=True)
    log = tmp / "sidecar.log"
    argv = [
        sys.executable, "-m", "hangwatch", "sidecar", "--bootstrap", bootstrap, "--port", "0",
        "--telemetry-dir", str(telemetry), "--probe-interval-seconds", "1",
        "--stall-seconds", "4", "--heartbeat-seconds", "3", "--hysteresis-intervals", "1",
        "--connect-timeout-ms", "1000", "--request-timeout-ms", "1000", *args,
    ]  # fmt: skip
    with log.open("ab") as sink:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=sink, stderr=sink)
    try:
        yield SidecarProcess(proc, log)
    finally:
        stop_process(proc, 5.0)
