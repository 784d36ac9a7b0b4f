"""Shared helpers of the probe tests: fast settings, running the real CLI, finding rows."""

from __future__ import annotations

import socket
import subprocess

from hangwatch_lab import Lab
from hangwatch_sidecar.probe.endpoints import probe_cluster
from hangwatch_sidecar.probe.report import EndpointRow, ProbeAssessment, assess
from hangwatch_sidecar.probe.settings import Endpoint, ProbeSettings, parse_bootstrap
from hangwatch_sidecar.probe.types import ProbeResult
from hangwatch_testing.processes import run_hangwatch

CONNECT_MS = 800
REQUEST_MS = 800
FAST = ProbeSettings(connect_timeout_ms=CONNECT_MS, request_timeout_ms=REQUEST_MS)
"""Short timeouts keep the suite fast; healthy answers on loopback take < 5 ms."""

FAST_FLAGS = ["--connect-timeout-ms", str(CONNECT_MS), "--request-timeout-ms", str(REQUEST_MS)]


def probe_lab(
    lab: Lab, topics: tuple[str, ...] = (), settings: ProbeSettings = FAST, extra: str = ""
) -> tuple[ProbeResult, ProbeAssessment]:
    """Probe the lab's bootstrap list (plus `extra` entries) and judge the result."""
    text = lab.bootstrap + (f",{extra}" if extra else "")
    result = probe_cluster(parse_bootstrap(text), topics, settings)
    return result, assess(result)


def broker_endpoint(lab: Lab, broker: int) -> Endpoint:
    return Endpoint(lab.brokers[broker].host, lab.brokers[broker].port)


def row(assessment: ProbeAssessment, endpoint: Endpoint) -> EndpointRow:
    """The row of `endpoint` (exactly one must exist)."""
    (found,) = [r for r in assessment.rows if r.probe.endpoint == endpoint]
    return found


def codes(assessment: ProbeAssessment) -> set[str]:
    return {f.code for f in assessment.findings}


def refused_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def run_cli(*args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    """Run `python -m hangwatch probe ARGS` as an on-call engineer would."""
    return run_hangwatch("probe", *args, timeout=timeout)
