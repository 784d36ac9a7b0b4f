"""The socket view in /status and /metrics: bounded, typed, and readable by the operator.

Covered: a state with 200 connections gives a /status document listing at most
`status.MAX_CONNECTIONS` (unanswered first) and counting all 200, which round-trips
through the wire format's encoder and the operator's decoder; the probes' costs per
broker are in `sidecar`; the view switched off is `sockets: null`; an unavailable view
says why; metrics count connections by pattern (a bounded label) and the probes' new
connections and requests per broker.
"""

from __future__ import annotations

from prometheus_client import generate_latest

from hangwatch.wire import status
from hangwatch_sidecar.metrics import registry_for
from hangwatch_sidecar.sockets.types import Pattern
from hangwatch_sidecar.state import ProbeCounts, SidecarState, status_document
from tests.sidecar.builders import connection, socket_view


def _state(**changes: object) -> SidecarState:
    return SidecarState(started_ts=1.0, **changes)  # type: ignore[arg-type]


def test_status_lists_a_bounded_number_of_connections_and_counts_all() -> None:
    many = [connection(connection=f"10.0.0.9:{40000 + i}->10.0.0.1:9092") for i in range(199)]
    stuck = connection(
        connection="10.0.0.9:39999->10.0.0.1:9092", pattern=Pattern.UNANSWERED, waiting_seconds=70.0
    )
    counts = ProbeCounts(connects={"10.0.0.1:9092": 2}, requests={"10.0.0.1:9092": 9})
    doc = status_document(_state(sockets=socket_view(*many, stuck), probe_counts=counts, rounds=3))
    decoded = status.decode(status.encode(doc))
    assert decoded.sockets is not None
    assert decoded.sockets.connections_total == 200
    assert len(decoded.sockets.connections) == status.MAX_CONNECTIONS
    first = decoded.sockets.connections[0]
    assert first.pattern == "unanswered" and first.waiting_seconds == 70.0
    assert decoded.sidecar.probe_connects == {"10.0.0.1:9092": 2}
    assert decoded.sidecar.probe_requests == {"10.0.0.1:9092": 9}


def test_switched_off_and_unavailable_views() -> None:
    assert status_document(_state()).sockets is None
    broken = status_document(_state(sockets=socket_view(error="sock_diag netlink unavailable: x")))
    assert broken.sockets is not None and broken.sockets.available is False
    assert broken.sockets.error == "sock_diag netlink unavailable: x"


def test_metrics_count_connections_by_pattern_and_probe_costs_by_broker() -> None:
    state = _state(
        sockets=socket_view(connection(), connection(connection="b", pattern=Pattern.UNANSWERED)),
        probe_counts=ProbeCounts(connects={"10.0.0.1:9092": 1}, requests={"10.0.0.1:9092": 4}),
    )
    text = generate_latest(registry_for(lambda: state)).decode()
    assert 'hangwatch_socket_connections{pattern="unanswered"} 1.0' in text
    assert 'hangwatch_socket_connections{pattern="idle"} 1.0' in text
    assert "hangwatch_socket_view_up 1.0" in text
    assert 'hangwatch_probe_connections_total{broker="10.0.0.1:9092"} 1.0' in text
    assert 'hangwatch_probe_requests_total{broker="10.0.0.1:9092"} 4.0' in text
    off = generate_latest(registry_for(_state)).decode()
    assert "hangwatch_socket_view_up 0.0" in off
