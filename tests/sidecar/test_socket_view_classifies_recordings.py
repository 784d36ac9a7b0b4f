"""The socket view's classifier on real kernel snapshots (recorded on the lab) and edge cases.

Recordings (scripts/record_socket_snapshots.py: a plain confluent-kafka producer, the
lab, `SocketReader`) replayed through `SocketClassifier` with a 5 s stall threshold:

- healthy: connections only `answered`/`idle`/briefly `awaiting`, never unanswered or
  blackholed;
- idle producer (one burst, then open and silent): every connection `idle`, silence grows
  with time, nothing outstanding;
- stall-produce (S2's lost batch): the wedged connections become `unanswered` once the
  wait passes the threshold (not before), with the wait measured from the request;
- blackhole of the leader (S3) and of every broker (S0) after the connection was up: the
  connection with unacknowledged data becomes `blackholed` within ~1.5 s;
- connects into a blackhole (S0 at start-up): SYN-SENT `connecting`, then
  `connect_unanswered` after the first SYN retransmission;
- on Apache Kafka whose brokers close connections idle 3 s (a plain producer, its own
  connections only): left idle after a burst, its silence of writes only grows through
  the closes, reconnects and metadata refreshes; writing every 5 s through them, its
  silence never passes the gap between writes plus a round;
- edge cases on constructed snapshots: a connection that never received, one answered
  then asked again (the wait restarts), a new request on an old idle connection is not
  waited since the old answer, counters (failed connects less the sidecar's own, counter
  reset), unknown peers ignored, the view unavailable, memory bounded to live connections.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from hangwatch_sidecar.sockets.classify import MIN_WRITE_BYTES_V3, SocketClassifier
from hangwatch_sidecar.sockets.types import (
    Pattern,
    SocketObservation,
    SocketSnapshot,
    TcpConnection,
    TcpState,
)
from tests.sidecar.socket_recordings import load, replay


def _patterns(name: str) -> list[tuple[float, set[Pattern]]]:
    rec = load(name)
    return [(o.at, {c.pattern for c in o.connections}) for o in replay(rec) if o.connections]


def test_healthy_producer_is_never_unanswered_or_blackholed() -> None:
    seen = set().union(*(p for _, p in _patterns("healthy")))
    assert seen <= {Pattern.ANSWERED, Pattern.IDLE, Pattern.AWAITING}, seen
    assert Pattern.ANSWERED in seen


def test_idle_producer_is_idle_and_silence_grows() -> None:
    observations = [o for o in replay(load("idle")) if o.connections]
    late = observations[-1]
    assert {c.pattern for c in late.connections} == {Pattern.IDLE}
    assert late.silent_seconds is not None and late.silent_seconds > 5.0
    assert all(not c.request_outstanding for c in late.connections)
    silences = [o.silent_seconds for o in observations[-5:]]
    assert silences == sorted(silences)


def test_stall_produce_becomes_unanswered_after_the_threshold() -> None:
    rec = load("stall_produce")
    assert rec.fault_at is not None
    for obs in replay(rec, stall_seconds=5.0):
        unanswered = obs.by_pattern(Pattern.UNANSWERED)
        if obs.at < rec.fault_at + 5.0:
            assert not unanswered, obs
        for c in unanswered:
            assert c.waiting_seconds is not None and c.waiting_seconds >= 5.0
            assert c.unacked == 0 and c.state is TcpState.ESTABLISHED
    last = replay(rec)[-1]
    assert last.by_pattern(Pattern.UNANSWERED), last
    # the wait is measured from the unanswered request, not from the start of the recording
    wait = max(c.waiting_seconds or 0 for c in last.connections)
    assert wait <= last.at - rec.fault_at + 0.1


def test_blackholed_leader_is_blackholed_within_two_seconds() -> None:
    for name in ("blackhole", "blackhole_all"):
        rec = load(name)
        assert rec.fault_at is not None
        hits = [o for o in replay(rec) if o.by_pattern(Pattern.BLACKHOLED)]
        assert hits, name
        assert hits[0].at - rec.fault_at <= 2.0, (name, hits[0].at)
        assert all(
            c.retransmits >= 2 and c.unacked > 0 for c in hits[-1].by_pattern(Pattern.BLACKHOLED)
        )
        assert not any(o.by_pattern(Pattern.UNANSWERED) for o in replay(rec)), name


def test_connects_into_a_blackhole_become_connect_unanswered() -> None:
    patterns = _patterns("connect_blackholed")
    assert patterns[0][1] == {Pattern.CONNECTING}
    assert patterns[-1][1] == {Pattern.CONNECT_UNANSWERED}


BROKERS = {"10.0.0.1:9092": "10.0.0.1:9092", "10.0.0.2:9092": "10.0.0.2:9092"}
BASE = TcpConnection(
    local="10.0.0.9:40000",
    peer="10.0.0.1:9092",
    state=TcpState.ESTABLISHED,
    inode=7,
    uid=185,
    last_data_sent_ms=100,
    last_data_recv_ms=90,
    last_ack_recv_ms=90,
    bytes_sent=1000,
    bytes_acked=1001,
    bytes_received=500,
    unacked=0,
    retransmits=0,
    backoff=0,
)


def _observe(
    classifier: SocketClassifier, at: float, *conns: TcpConnection, fails: int | None = None
) -> SocketObservation:
    return classifier.observe(
        SocketSnapshot(at=at, connections=conns, attempt_fails=fails), BROKERS, 5.0
    )


def test_a_connection_that_never_received_is_outstanding() -> None:
    never = replace(BASE, bytes_received=0, last_data_recv_ms=20_000, last_data_sent_ms=19_000)
    obs = _observe(SocketClassifier(), 100.0, never)
    (c,) = obs.connections
    assert c.pattern is Pattern.UNANSWERED and c.last_received_seconds is None
    assert c.waiting_seconds == 19.0


def test_wait_restarts_when_an_answer_arrives_and_a_new_request_is_not_dated_back() -> None:
    classifier = SocketClassifier()
    # idle for 60 s, then a request sent 0.1 s ago: waiting 0.1 s, not 60 s
    asked = replace(BASE, last_data_recv_ms=60_000, last_data_sent_ms=100)
    (c,) = _observe(classifier, 100.0, asked).connections
    assert c.pattern is Pattern.AWAITING and c.waiting_seconds == pytest.approx(0.1)
    # 4 s later, still unanswered (a further request went out meanwhile): 4.1 s
    later = replace(asked, last_data_recv_ms=64_000, last_data_sent_ms=1_000, bytes_sent=2000)
    (c,) = _observe(classifier, 104.0, later).connections
    assert c.waiting_seconds == pytest.approx(4.1)
    # the answer came and a new request left 0.2 s ago: the wait restarts
    answered = replace(later, bytes_received=900, last_data_recv_ms=500, last_data_sent_ms=200)
    (c,) = _observe(classifier, 110.0, answered).connections
    assert c.pattern is Pattern.AWAITING and c.waiting_seconds == pytest.approx(0.2)


def test_idle_and_answered_connections_are_not_outstanding() -> None:
    idle = replace(BASE, last_data_sent_ms=30_000, last_data_recv_ms=29_990)
    fresh = replace(BASE, local="10.0.0.9:40001", last_data_sent_ms=300, last_data_recv_ms=290)
    obs = _observe(SocketClassifier(), 50.0, idle, fresh)
    assert {c.connection: c.pattern for c in obs.connections} == {
        idle.name: Pattern.IDLE,
        fresh.name: Pattern.ANSWERED,
    }
    assert obs.silent_seconds == 0.29
    assert obs.answered_brokers == {"10.0.0.1:9092": 0.29}


def test_unacknowledged_data_without_retransmissions_is_only_awaiting() -> None:
    in_flight = replace(
        BASE, unacked=3, retransmits=1, last_data_sent_ms=10, last_data_recv_ms=9_000
    )
    (c,) = _observe(SocketClassifier(), 1.0, in_flight).connections
    assert c.pattern is Pattern.AWAITING


def test_other_peers_and_closing_states_are_left_out_or_closing() -> None:
    other = replace(BASE, peer="10.9.9.9:5432")
    closing = replace(BASE, local="10.0.0.9:40002", state=TcpState.CLOSE_WAIT)
    obs = _observe(SocketClassifier(), 1.0, other, closing)
    assert [c.pattern for c in obs.connections] == [Pattern.CLOSING]


def test_failed_connects_are_the_counter_delta_less_the_sidecars_own() -> None:
    classifier = SocketClassifier()
    assert _observe(classifier, 0.0, fails=10).failed_connects is None  # no previous value
    obs = classifier.observe(
        SocketSnapshot(at=5.0, attempt_fails=17), BROKERS, 5.0, own_failed_connects=2
    )
    assert obs.failed_connects == 5 and obs.failed_connects_seconds == 5.0
    assert _observe(classifier, 10.0, fails=3).failed_connects is None  # counter went back
    assert _observe(classifier, 15.0, fails=None).failed_connects is None


def test_an_unavailable_view_carries_its_error_and_forgets_waits() -> None:
    classifier = SocketClassifier()
    _observe(classifier, 0.0, replace(BASE, last_data_recv_ms=9_000, last_data_sent_ms=10))
    obs = classifier.observe(
        SocketSnapshot(at=1.0, error="sock_diag netlink unavailable"), BROKERS, 5.0
    )
    assert not obs.available and obs.connections == ()
    assert classifier._waiting == {}


def test_memory_holds_only_live_connections() -> None:
    classifier = SocketClassifier()
    for i in range(100):
        waiting = replace(
            BASE, local=f"10.0.0.9:{41000 + i}", last_data_recv_ms=9_000, last_data_sent_ms=10
        )
        _observe(classifier, float(i), waiting)
    assert len(classifier._waiting) == 1


def test_a_producer_left_idle_stays_silent_through_idle_closes_and_refreshes() -> None:
    """`idle_closed` (Apache Kafka, brokers closing connections idle 3 s, a plain
    confluent-kafka producer refreshing its metadata every 4 s after a 2 s burst): once the
    burst has ended its silence of writes only grows, at 0.5 s and 1 s rounds, through
    every connection the brokers closed and every reconnect and refresh it sent."""
    rec = load("idle_closed")
    assert rec.smallest_write == MIN_WRITE_BYTES_V3  # Kafka 4's brokers
    for every in (1, 2):
        observations = [o for o in replay(rec, every=every) if o.writes is not None]
        quiet = [o for o in observations if o.at >= 4.0]
        silences = [o.writes.last_write_seconds for o in quiet if o.writes is not None]
        assert silences == sorted(silences), (every, silences)
        last = quiet[-1].writes
        assert last is not None and last.last_write_seconds >= quiet[-1].at - 4.0, last
        assert last.closed >= 1 and last.not_writes >= 1, last


def test_a_producer_writing_every_5_s_through_idle_closes_is_never_silent_long() -> None:
    """`writes_through_idle_closes` (one write every 5 s, each on a connection opened
    again after the brokers closed the last one): at rounds of 0.5 to 5 s the silence of
    writes never reaches the 5 s between writes plus a round."""
    rec = load("writes_through_idle_closes")
    for every in (1, 2, 4, 10):
        round_seconds = 0.5 * every
        silences = [
            o.writes.last_write_seconds
            for o in replay(rec, every=every)
            if o.writes is not None and o.at >= 3.0
        ]
        assert silences and max(silences) < 5.0 + round_seconds + 1.0, (every, silences)
