"""A lab with a real `hangwatch sidecar` process watching a telemetry directory.

Not a test module: shared by the chart's tests that drive alerts with a real fault. The
sidecar probes the lab's brokers for the demo's topic every second and judges with the
demo's short detection settings (`hangwatch_demo.scenarios.Timing`), so a blocked
producer is `producer_hung` within seconds. The sidecar and the lab are stopped on every
exit path.
"""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator
from pathlib import Path

from hangwatch_demo.scenarios import PARTITIONS, TOPIC, Timing
from hangwatch_lab import Lab
from hangwatch_testing.ports import free_port
from hangwatch_testing.processes import sidecar_command


@contextlib.contextmanager
def sidecar_on_lab(
    telemetry: Path, engine: str = "mock", brokers: int = 3
) -> Iterator[tuple[str, Lab]]:
    """(the sidecar's host:port, the lab); the sidecar reads `telemetry`."""
    timing = Timing()
    with Lab(brokers=brokers, topics={TOPIC: PARTITIONS}, engine=engine) as lab:
        port = free_port()
        sidecar = subprocess.Popen(
            sidecar_command(
                lab.bootstrap,
                TOPIC,
                telemetry,
                *("--probe-interval-seconds", f"{timing.probe_interval_seconds:g}"),
                *("--stall-seconds", f"{timing.stall_seconds:g}"),
                *("--heartbeat-seconds", f"{timing.heartbeat_seconds:g}"),
                *("--connect-timeout-ms", str(timing.connect_timeout_ms)),
                *("--request-timeout-ms", str(timing.request_timeout_ms)),
                port=port,
            ),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            yield f"127.0.0.1:{port}", lab
        finally:
            sidecar.terminate()
            try:
                sidecar.wait(timeout=10)
            except subprocess.TimeoutExpired:
                sidecar.kill()
                sidecar.wait(timeout=10)
