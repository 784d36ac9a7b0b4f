"""The sidecar's published state and its /status JSON document.

The evaluation loop (`hangwatch_sidecar.loop`) builds a new immutable `SidecarState`
after every round and swaps it in; the HTTP server and the metrics collector only
read the latest one, so a slow scrape never blocks probing and vice versa.
`status_document` is the stable JSON contract of `/status` (README: Sidecar).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from hangwatch import __version__
from hangwatch.contracts import Verdict
from hangwatch_sidecar.evidence import ClusterObservation, ProducerObservation
from hangwatch_sidecar.sockets.types import SocketObservation
from hangwatch_sidecar.verdicts import MAX_CONNECTIONS_SHOWN, Assessment, PodAssessment

STATUS_SCHEMA = 1


@dataclass(frozen=True)
class ProbeCounts:
    """What probing cost the brokers since the sidecar started (for /status and metrics)."""

    connects: Mapping[str, int] = field(default_factory=dict)
    """New probe connections per broker."""
    requests: Mapping[str, int] = field(default_factory=dict)
    """ApiVersions probe requests per broker."""
    metadata_requests: int = 0
    metadata_clients: int = 0
    """Metadata clients created (each opens its own connections)."""


@dataclass(frozen=True)
class SidecarState:
    """Everything /status and /metrics show, as of the last evaluation round."""

    started_ts: float
    verdict: Verdict = Verdict.UNKNOWN
    since_ts: float | None = None
    assessment: PodAssessment | None = None
    cluster: ClusterObservation | None = None
    cluster_ts: float | None = None
    metadata_ts: float | None = None
    producers: tuple[ProducerObservation, ...] = ()
    rounds: int = 0
    evaluated_ts: float | None = None
    round_seconds: float = 0.0
    probe_errors: Mapping[str, int] = field(default_factory=dict)
    verdict_changes: Mapping[str, int] = field(default_factory=dict)
    telemetry_problems: Mapping[str, int] = field(default_factory=dict)
    identity: Mapping[str, str] = field(default_factory=dict)
    settings: Mapping[str, Any] = field(default_factory=dict)
    sockets: SocketObservation | None = None
    """The round's view of the pod's own connections to brokers (None: switched off)."""
    probe_counts: ProbeCounts = field(default_factory=ProbeCounts)


def _assessment(a: Assessment) -> dict[str, Any]:
    return {"verdict": str(a.verdict), "reasons": list(a.reasons), "evidence": a.evidence}


def status_document(state: SidecarState) -> dict[str, Any]:
    """The /status JSON: pod verdict (debounced), latest raw assessment, brokers, producers."""
    latest = state.assessment
    return {
        "schema": STATUS_SCHEMA,
        "version": __version__,
        "identity": dict(state.identity),
        "verdict": str(state.verdict),
        "since": state.since_ts,
        "reasons": list(latest.pod.reasons)
        if latest and latest.pod.verdict is state.verdict
        else [],
        "latest": _assessment(latest.pod) if latest else None,
        "brokers": [
            {
                "address": b.address,
                "node_id": b.node_id,
                "reachability": str(b.reachability),
                "latency_ms": b.latency_ms,
                "in_bootstrap": b.in_bootstrap,
                "advertised": b.advertised,
                "detail": b.detail,
            }
            for b in (state.cluster.brokers if state.cluster else ())
        ],
        "cluster": None
        if state.cluster is None
        else {
            "probed_ts": state.cluster_ts,
            "metadata_ts": state.metadata_ts,
            "metadata_ok": state.cluster.metadata_ok,
            "leaderless": state.cluster.leaderless_for(frozenset()),
            "error": state.cluster.error,
        },
        "producers": {
            key: _assessment(a) for key, a in (latest.producers.items() if latest else ())
        },
        "sockets": None if state.sockets is None else state.sockets.summary(MAX_CONNECTIONS_SHOWN),
        "sidecar": {
            "started_ts": state.started_ts,
            "rounds": state.rounds,
            "evaluated_ts": state.evaluated_ts,
            "round_seconds": round(state.round_seconds, 4),
            "probe_connects": dict(state.probe_counts.connects),
            "probe_requests": dict(state.probe_counts.requests),
            "metadata_requests": state.probe_counts.metadata_requests,
            "settings": dict(state.settings),
        },
    }
