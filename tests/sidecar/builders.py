"""Builders of evidence for the pure verdict-engine tests (no I/O)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from hangwatch.contracts import Reachability
from hangwatch_sidecar.evidence import BrokerObservation, ClusterObservation, ProducerObservation
from hangwatch_sidecar.sockets.types import (
    ConnectionEvidence,
    Pattern,
    SocketObservation,
    TcpState,
)

OK = Reachability.OK


def cluster(
    *classes: Reachability,
    leaderless_topics: frozenset[str] = frozenset(),
    leaders: dict[tuple[str, int], int] | None = None,
    **kw: Any,
) -> ClusterObservation:
    brokers = tuple(
        BrokerObservation(address=f"10.0.0.{i}:9092", reachability=c, node_id=i)
        for i, c in enumerate(classes or (OK, OK, OK), start=1)
    )
    return ClusterObservation(
        at=100.0,
        brokers=brokers,
        metadata_ok=any(b.reachability is OK for b in brokers),
        leaders=leaders or {("t", 0): 1, ("t", 1): 2, ("t", 2): 3},
        leaderless_topics=leaderless_topics,
        **kw,
    )


BASE = ProducerObservation(
    key="producer-42-1",
    pid=42,
    alive=True,
    pending=0,
    delivered_total=1000,
    failed_total=0,
    topics=frozenset({"t"}),
    heartbeat_age_seconds=1.0,
    progress_age_seconds=0.5,
    pending_seconds=0.0,
    failing_seconds=0.0,
    leaders={("t", 0): 1, ("t", 1): 2, ("t", 2): 3},
    metadata_age_seconds=5.0,
)


def producer(**changes: Any) -> ProducerObservation:
    return replace(BASE, **changes)


CONNECTION = ConnectionEvidence(
    connection="10.0.0.9:40000->10.0.0.1:9092",
    broker="10.0.0.1:9092",
    pattern=Pattern.IDLE,
    state=TcpState.ESTABLISHED,
    uid=185,
    waiting_seconds=None,
    quiet_seconds=3.0,
    last_received_seconds=3.0,
)
"""One of the pod's own connections to broker 10.0.0.1:9092, idle for 3 s."""


def connection(**changes: Any) -> ConnectionEvidence:
    return replace(CONNECTION, **changes)


def socket_view(*connections: ConnectionEvidence, **changes: Any) -> SocketObservation:
    """The socket view of one round holding `connections`."""
    return SocketObservation(at=100.0, connections=connections, **changes)
