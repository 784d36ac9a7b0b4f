"""The sidecar's published state and its /status JSON document.

The evaluation loop (`hangwatch_sidecar.loop`) builds a new immutable `SidecarState`
after every round and swaps it in; the HTTP server and the metrics collector only
read the latest one, so a slow scrape never blocks probing and vice versa.
`status_document` builds the `/status` document, whose types and bounds are
`hangwatch.wire.status` (the operator reads it with the same module; docs/sidecar.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from hangwatch import __version__
from hangwatch.contracts import Verdict
from hangwatch.wire import status
from hangwatch_sidecar.evidence import BrokerObservation, ClusterObservation, ProducerObservation
from hangwatch_sidecar.sockets.types import SocketObservation
from hangwatch_sidecar.verdicts import Assessment, PodAssessment


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
    time_to_error: status.TimeToError | None = None
    """Producers whose own settings can stay silent longer than the budget (a warning)."""
    sockets: SocketObservation | None = None
    """The round's view of the pod's own connections to brokers (None: switched off)."""
    probe_counts: ProbeCounts = field(default_factory=ProbeCounts)


def _assessment(a: Assessment) -> status.Assessment:
    return status.Assessment(verdict=str(a.verdict), reasons=list(a.reasons), evidence=a.evidence)


def _broker(b: BrokerObservation) -> status.BrokerStatus:
    return status.BrokerStatus(
        address=b.address,
        node_id=b.node_id,
        reachability=str(b.reachability),
        latency_ms=b.latency_ms,
        in_bootstrap=b.in_bootstrap,
        advertised=b.advertised,
        detail=b.detail,
    )


def _sockets(view: SocketObservation | None) -> status.SocketViewStatus | None:
    """The socket view, bounded: the connections that matter first, at most
    `status.MAX_CONNECTIONS` of them (all are counted)."""
    if view is None:
        return None
    return status.SocketViewStatus(
        available=view.available,
        error=view.error,
        connections_total=len(view.connections),
        connections=[
            status.ConnectionStatus(**c.as_dict())  # type: ignore[arg-type]
            for c in view.ranked()[: status.MAX_CONNECTIONS]
        ],
        silent_seconds=view.silent_seconds,
        failed_connects=view.failed_connects,
        failed_connects_seconds=view.failed_connects_seconds,
    )


def status_document(state: SidecarState) -> status.StatusDocument:
    """The /status document: pod verdict (debounced), latest raw assessment, brokers,
    producers, the producers over the time-to-error budget (`hangwatch.wire.status`)."""
    latest = state.assessment
    cluster = state.cluster
    return status.StatusDocument(
        version=__version__,
        identity=dict(state.identity),
        verdict=str(state.verdict),
        since=state.since_ts,
        reasons=list(latest.pod.reasons) if latest and latest.pod.verdict is state.verdict else [],
        latest=_assessment(latest.pod) if latest else None,
        brokers=[_broker(b) for b in (cluster.brokers if cluster else ())],
        cluster=None
        if cluster is None
        else status.ClusterStatus(
            probed_ts=state.cluster_ts,
            metadata_ts=state.metadata_ts,
            metadata_ok=cluster.metadata_ok,
            leaderless=cluster.leaderless_for(frozenset()),
            error=cluster.error,
        ),
        producers={key: _assessment(a) for key, a in (latest.producers.items() if latest else ())},
        sidecar=status.SidecarInfo(
            started_ts=state.started_ts,
            rounds=state.rounds,
            evaluated_ts=state.evaluated_ts,
            round_seconds=round(state.round_seconds, 4),
            settings=dict(state.settings),
            probe_connects=dict(state.probe_counts.connects),
            probe_requests=dict(state.probe_counts.requests),
            metadata_requests=state.probe_counts.metadata_requests,
        ),
        time_to_error=state.time_to_error,
        sockets=_sockets(state.sockets),
    )
