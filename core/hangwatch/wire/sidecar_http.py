"""The sidecar's HTTP endpoint: one port, three paths (docs/sidecar.md, HTTP).

Served by `hangwatch_sidecar.server`; the operator polls `STATUS_PATH`
(`hangwatch_operator.status_polling`), Prometheus scrapes `METRICS_PATH` and the kubelet
probes `HEALTHZ_PATH`. Pure: no I/O.
"""

from __future__ import annotations

PORT = 9477
"""It shares the pod's network namespace with Spark, so it avoids Spark's ports (4040-4045
UI, 7077-7079 RPC and block manager); 9477 is free of those and of common exporters."""

METRICS_PATH = "/metrics"
"""Prometheus text exposition of the sidecar's metrics."""

STATUS_PATH = "/status"
"""The `/status` JSON document (`hangwatch.wire.status`)."""

HEALTHZ_PATH = "/healthz"
"""200 while evaluation rounds keep completing, 503 once they stop (liveness)."""

PATHS = (METRICS_PATH, STATUS_PATH, HEALTHZ_PATH)


def status_url(ip: str, port: int) -> str:
    """The URL of a sidecar's `/status` at a pod IP (IPv6 addresses bracketed)."""
    host = f"[{ip}]" if ":" in ip else ip
    return f"http://{host}:{port}{STATUS_PATH}"
