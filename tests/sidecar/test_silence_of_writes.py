"""Silence that lasts: the socket view's memory of the pod's last write (issue 43, item 3).

A producer service that declared its write interval and is stuck inside its client stays
silent after the brokers close its idle connections (`connections.max.idle.ms`) and while
its client refreshes metadata; a healthy one writing at its interval is never called
silent, whatever closes and reconnects happen between its writes.

Covered, on constructed kernel snapshots through the real classifier and judge:

- what cannot hold a write: sends smaller than Kafka's smallest write (a Produce request
  carrying one record: 65 bytes; 102 once the brokers refuse Produce below v3), every
  other segment counted as at least the smallest request; a property: any mix of sends
  holding one write, however the kernel coalesced or split them, is never taken for one
  without a write; the smallest write from the brokers' Fetch floors (Apache Kafka 4's),
  read from any bytes a broker answers without an error (a property);
- the memory: the first sight dates the last write from what the kernel says moved last;
  a write, then its connection closed and none left, the silence goes on and counts the
  closed connection; a metadata refresh on a kept connection and a reconnect's handshake
  do not end it (counted); a new connection whose first sends hold a write ends it; a
  send of 68 bytes (librdkafka's ApiVersions) is a write against brokers that take
  Produce v0 and none against brokers that refuse it; a view that fails for a round
  forgets nothing; memory is bounded to the live connections;
- the judge: past a declared interval with no connection left -> `producer_silent`,
  naming the closed connections and the sends too small to be writes, `held`; with no
  interval declared nothing (an idle producer stays unjudged); never with a request
  outstanding; never while Spark says no task runs; never before a connection of the pod
  was seen; the same through the whole verdict engine (`rules.evaluate`);
- a connection the producer closed between two snapshots (TIME_WAIT, no counters) may
  have held a write: it ends the silence once, dated by its timer;
- a property (first, do no harm): a healthy producer writing at least every interval
  minus a round, through random idle closes, reconnects, metadata refreshes and round
  gaps, each write on a connection that lives until the next snapshot or that the
  producer closes itself (its TIME_WAIT seen), is never `producer_silent`;
- /status carries the memory's figures through the wire format.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hangwatch.contracts import Verdict
from hangwatch.wire import status
from hangwatch_sidecar.assessment import Thresholds
from hangwatch_sidecar.probe.endpoints import lowest_version
from hangwatch_sidecar.round import RoundEvidence
from hangwatch_sidecar.rules import evaluate
from hangwatch_sidecar.sockets.classify import (
    MIN_REQUEST_BYTES,
    MIN_WRITE_BYTES,
    MIN_WRITE_BYTES_V3,
    SocketClassifier,
    holds_no_write,
    min_write_bytes,
)
from hangwatch_sidecar.sockets.judge import judge_sockets
from hangwatch_sidecar.sockets.types import (
    ClosedConnection,
    SocketObservation,
    SocketSnapshot,
    TcpConnection,
    TcpState,
    WriteMemory,
)
from hangwatch_sidecar.state import SidecarState, status_document
from tests.sidecar.builders import cluster

BROKERS = {f"10.0.0.{i}:9092": f"broker-{i}:9092" for i in (1, 2, 3)}
INTERVAL = 12.0
"""The declared write interval (issue 43's case)."""


def conn(port: int, broker: int = 1, **changes: object) -> TcpConnection:
    """A connection that has sent `bytes_sent` in `data_segs_out` segments, its last send
    answered (unless `changes` say otherwise)."""
    changes.setdefault("bytes_received", 100)
    changes.setdefault("last_data_recv_ms", changes.get("last_data_sent_ms", 0))
    base = TcpConnection(
        local=f"10.0.0.9:{port}",
        peer=f"10.0.0.{broker}:9092",
        state=TcpState.ESTABLISHED,
        inode=port,
        uid=185,
        last_data_sent_ms=0,
        last_data_recv_ms=0,
        last_ack_recv_ms=0,
        bytes_sent=0,
        bytes_acked=1,
        bytes_received=0,
        unacked=0,
        retransmits=0,
        backoff=0,
    )
    return replace(base, **changes)  # type: ignore[arg-type]


def look(
    classifier: SocketClassifier, at: float, *conns: TcpConnection, smallest: int = 65
) -> SocketObservation:
    return classifier.observe(
        SocketSnapshot(at=at, connections=conns), BROKERS, 5.0, smallest_write=smallest
    )


def silence(view: SocketObservation, **changes: object) -> list[Verdict]:
    options: dict[str, object] = {
        "stall_seconds": 5.0,
        "cluster_healthy": True,
        "request_timeout_seconds": 30.0,
        "write_interval_seconds": INTERVAL,
    }
    options.update(changes)
    found = judge_sockets(view, **options)  # type: ignore[arg-type]
    return [f.verdict for f in found]


# -- what cannot hold a write --------------------------------------------------------------------


@given(
    smallest=st.sampled_from([MIN_WRITE_BYTES, MIN_WRITE_BYTES_V3]),
    extra=st.integers(0, 2_000_000),
    others=st.lists(st.integers(MIN_REQUEST_BYTES, 5_000), max_size=8),
    mss=st.integers(536, 65_483),
    coalesced=st.integers(0, 8),
)
def test_sends_holding_a_write_are_never_taken_for_sends_without_one(
    smallest: int, extra: int, others: list[int], mss: int, coalesced: int
) -> None:
    """One write of at least the smallest write's size among other requests: the write
    split into MSS-sized segments (the client wrote it whole), the others one segment
    each unless the kernel coalesced some of them into fewer."""
    write = smallest + extra
    write_segments = -(-write // mss)
    other_segments = max(min(1, len(others)), len(others) - coalesced)
    sent = write + sum(others)
    assert not holds_no_write(sent, write_segments + other_segments, smallest)
    assert not holds_no_write(sent, 0, smallest)  # segments not counted by the kernel


def test_what_real_clients_sent_between_writes_holds_no_write() -> None:
    """Sizes measured on the lab (Apache Kafka 4.4.0: Produce v3 and up), one snapshot per
    request: sarama v1.38.0's metadata request (33 bytes) and its first two requests (51 in
    2 segments), kafka-go v0.4.9's (21; 35 in 2), librdkafka 2.16.0's metadata request (50)
    and ApiVersions (68), kafka-clients 3.9.2's ApiVersions and metadata request on a new
    connection (103 in 2); their smallest writes: 141, 133 in 2, 118 and 1146 bytes."""
    for sent, segments in ((33, 1), (51, 2), (21, 1), (35, 2), (50, 1), (103, 2)):
        assert holds_no_write(sent, segments, MIN_WRITE_BYTES_V3), (sent, segments)
    assert holds_no_write(33, 1, MIN_WRITE_BYTES) and holds_no_write(51, 2, MIN_WRITE_BYTES)
    assert not holds_no_write(68, 1, MIN_WRITE_BYTES)  # Produce v0 could be that small
    for sent, segments in ((141, 1), (133, 2), (118, 1), (1146, 1), (186, 2)):
        assert not holds_no_write(sent, segments, MIN_WRITE_BYTES_V3), (sent, segments)


def test_the_smallest_write_comes_from_every_brokers_fetch_floor() -> None:
    """Apache Kafka 4 lists Fetch from v4 (and refuses Produce below v3, though it lists
    Produce v0); 3.x lists Fetch v0 and takes Produce v0."""
    assert min_write_bytes([4, 4, 4]) == MIN_WRITE_BYTES_V3
    assert min_write_bytes([4, 0, 4]) == MIN_WRITE_BYTES  # a 3.x broker among them
    assert min_write_bytes([4, None]) == MIN_WRITE_BYTES  # one not known yet
    assert min_write_bytes([]) == MIN_WRITE_BYTES


@given(st.binary(max_size=600), st.integers(-(2**15), 2**15 - 1))
def test_any_answer_bytes_give_a_floor_or_none_never_an_error(body: bytes, key: int) -> None:
    """What a broker (or anything listening on its port) answers to the probe's ApiVersions
    request crosses a trust boundary: any bytes give a version or None."""
    found = lowest_version(body, key)
    assert found is None or 0 <= found <= 2**15 - 1


@given(
    st.dictionaries(
        st.integers(0, 80), st.tuples(st.integers(0, 20), st.integers(0, 20)), max_size=70
    ),
    st.binary(max_size=8),
)
def test_a_well_formed_answer_gives_the_apis_lowest_version(
    ranges: dict[int, tuple[int, int]], trailing: bytes
) -> None:
    body = struct.pack(">hi", 0, len(ranges)) + b"".join(
        struct.pack(">hhh", key, low, high) for key, (low, high) in ranges.items()
    )
    for key, (low, high) in ranges.items():
        assert lowest_version(body + trailing, key) == (low if low <= high else None)
    assert lowest_version(struct.pack(">h", 35) + body[2:], 1) is None  # an error answer


# -- the memory ----------------------------------------------------------------------------------


def test_first_sight_dates_the_last_write_from_what_moved_last() -> None:
    classifier = SocketClassifier()
    assert look(classifier, 100.0).writes is None  # no connection of the pod seen yet
    quiet = conn(40001, last_data_sent_ms=40_000, last_data_recv_ms=39_000, bytes_sent=900)
    writes = look(classifier, 101.0, quiet).writes
    assert writes is not None and writes.last_write_seconds == 39.0


def test_silence_outlives_a_closed_connection_and_counts_it() -> None:
    classifier = SocketClassifier()
    look(classifier, 0.0, conn(40001, bytes_sent=500, data_segs_out=4))
    wrote = conn(40001, bytes_sent=640, data_segs_out=5, last_data_sent_ms=200)
    assert look(classifier, 1.0, wrote).writes == WriteMemory(pytest.approx(0.2))
    gone = look(classifier, 5.0)  # the broker closed it: nothing open any more
    assert gone.writes is not None and gone.writes.closed == 1
    later = look(classifier, 20.0)
    assert later.writes is not None and later.writes.last_write_seconds == pytest.approx(19.2)
    assert later.connections == () and later.silent_seconds is None


def test_metadata_refreshes_and_reconnects_do_not_end_the_silence() -> None:
    classifier = SocketClassifier()
    look(classifier, 0.0, conn(40001, bytes_sent=500, data_segs_out=4))
    look(classifier, 1.0)  # closed
    # a reconnect: ApiVersions and a metadata request, 60 bytes in 2 segments
    reconnect = conn(40002, broker=2, bytes_sent=60, data_segs_out=2, last_data_sent_ms=100)
    look(classifier, 8.0, reconnect)
    # a periodic refresh on it: one 33-byte request
    refresh = replace(
        reconnect, bytes_sent=93, data_segs_out=3, last_data_sent_ms=50, last_data_recv_ms=40
    )
    view = look(classifier, 15.0, refresh)
    assert view.writes is not None
    assert view.writes.last_write_seconds == 15.0 and view.writes.not_writes == 2
    assert view.writes.closed == 1
    assert silence(view) == [Verdict.PRODUCER_SILENT]


def test_a_write_on_a_new_connection_ends_the_silence() -> None:
    classifier = SocketClassifier()
    look(classifier, 0.0, conn(40001, bytes_sent=500, data_segs_out=4))
    look(classifier, 1.0)
    # ApiVersions (68) and a Produce (118) on a connection opened again for the write
    again = conn(40003, broker=3, bytes_sent=186, data_segs_out=2, last_data_sent_ms=300)
    view = look(classifier, 9.0, again, smallest=MIN_WRITE_BYTES_V3)
    assert view.writes is not None and view.writes.last_write_seconds == pytest.approx(0.3)
    assert view.writes.closed == 0 and view.writes.not_writes == 0
    assert silence(view) == []


def test_a_connection_the_pod_closed_unseen_may_have_held_a_write() -> None:
    """Opened, written on and closed by the producer between two snapshots: only its
    TIME_WAIT is left, dated by its timer; it ends the silence once, however many
    snapshots still list it."""
    classifier = SocketClassifier()
    look(classifier, 0.0, conn(40001, bytes_sent=500, data_segs_out=4))
    look(classifier, 1.0)
    gone = ClosedConnection("10.0.0.9:40009->10.0.0.2:9092", closed_seconds=2.0)
    seen = classifier.observe(SocketSnapshot(at=20.0, closed=(gone,)), BROKERS, 5.0)
    assert seen.writes is not None and seen.writes.last_write_seconds == 2.0
    still = classifier.observe(SocketSnapshot(at=40.0, closed=(gone,)), BROKERS, 5.0)
    assert still.writes is not None and still.writes.last_write_seconds == 22.0
    fresh = SocketClassifier()  # first sight of the pod: only a closed connection
    first = fresh.observe(SocketSnapshot(at=5.0, closed=(gone,)), BROKERS, 5.0)
    assert first.writes is not None and first.writes.last_write_seconds == 2.0


def test_a_68_byte_send_is_a_write_unless_the_brokers_refuse_produce_v0() -> None:
    for smallest, counted_as_write in ((MIN_WRITE_BYTES, True), (MIN_WRITE_BYTES_V3, False)):
        classifier = SocketClassifier()
        look(classifier, 0.0, conn(40001, bytes_sent=500, data_segs_out=4), smallest=smallest)
        versions = conn(40002, bytes_sent=68, data_segs_out=1, last_data_sent_ms=100)
        view = look(classifier, 10.0, versions, smallest=smallest)
        assert view.writes is not None
        assert (view.writes.last_write_seconds < 1.0) is counted_as_write, smallest


def test_a_failed_view_forgets_nothing_and_memory_holds_live_connections() -> None:
    classifier = SocketClassifier()
    look(classifier, 0.0, conn(40001, bytes_sent=500, data_segs_out=4))
    failed = classifier.observe(SocketSnapshot(at=2.0, error="netlink down"), BROKERS, 5.0)
    assert failed.writes is None and not failed.available
    view = look(classifier, 30.0)
    assert view.writes is not None and view.writes.last_write_seconds == 30.0
    for port in range(40100, 40300):
        look(classifier, 31.0, conn(port, bytes_sent=20, data_segs_out=1))
    assert len(classifier._sends) == 1


# -- the judge -----------------------------------------------------------------------------------


def _stuck_with_no_connection_left() -> SocketObservation:
    classifier = SocketClassifier()
    look(classifier, 0.0, conn(40001, bytes_sent=500, data_segs_out=4))
    look(classifier, 4.0, conn(40002, broker=2, bytes_sent=33, data_segs_out=1))
    return look(classifier, 13.0)


def test_past_the_interval_with_no_connection_left_is_producer_silent_naming_why() -> None:
    view = _stuck_with_no_connection_left()
    (finding,) = judge_sockets(
        view,
        stall_seconds=5.0,
        cluster_healthy=True,
        request_timeout_seconds=30.0,
        write_interval_seconds=INTERVAL,
    )
    assert finding.verdict is Verdict.PRODUCER_SILENT and finding.past_write_interval
    assert "silent for 13 s" in finding.reason
    assert f"longer than the expected write interval ({INTERVAL:.0f} s" in finding.reason
    assert "0 connection(s) open, 2 closed since its last write" in finding.reason
    assert "1 send(s) since then too small to hold a write" in finding.reason


def test_no_interval_no_silence_and_no_silence_while_a_request_is_outstanding() -> None:
    view = _stuck_with_no_connection_left()
    assert silence(view, write_interval_seconds=None) == []  # an idle producer: unjudged
    assert silence(view, spark_task_running=False) == []  # an executor between tasks
    assert silence(view, cluster_healthy=False) == []
    classifier = SocketClassifier()
    look(classifier, 0.0, conn(40001, bytes_sent=500, data_segs_out=4))
    asking = conn(40002, bytes_sent=33, data_segs_out=1, last_data_sent_ms=10, bytes_received=0)
    outstanding = look(classifier, 20.0, asking)
    assert outstanding.writes is not None and outstanding.writes.last_write_seconds == 20.0
    assert Verdict.PRODUCER_SILENT not in silence(outstanding)


def test_nothing_before_a_connection_of_the_pod_was_seen() -> None:
    classifier = SocketClassifier()
    for at in (0.0, 30.0, 300.0):
        assert silence(look(classifier, at)) == []


def test_the_rule_engine_flags_a_stuck_producer_with_no_connection_left() -> None:
    """Through the whole verdict engine: no connection of the pod left, the memory past
    the declared interval -> `producer_silent`, taken at once (held), alert only; no
    interval declared -> `unknown` (nothing to judge), as before."""
    view = _stuck_with_no_connection_left()
    declared = Thresholds(expected_write_interval_seconds=INTERVAL)
    found = evaluate(RoundEvidence(cluster(), [], sockets=view), thresholds=declared, now=13.0)
    assert found.pod.verdict is Verdict.PRODUCER_SILENT and found.pod.held
    assert "2 closed since its last write" in found.pod.reasons[0]
    assert "alert only" in found.pod.reasons[-1]
    plain = evaluate(RoundEvidence(cluster(), [], sockets=view), thresholds=Thresholds(), now=13.0)
    assert plain.pod.verdict is Verdict.UNKNOWN


# -- first, do no harm ---------------------------------------------------------------------------

ROUND = 2.0
"""The longest gap between two snapshots in the healthy producer's property."""


@dataclass
class _Conn:
    port: int
    broker: int
    sent: int = 0
    segments: int = 0
    last_sent: float = 0.0
    must_be_seen: bool = False
    """It carried a write no snapshot has seen yet: it lives until the next one."""

    def tcp(self, at: float) -> TcpConnection:
        return conn(
            self.port,
            self.broker,
            bytes_sent=self.sent,
            data_segs_out=self.segments,
            last_data_sent_ms=int((at - self.last_sent) * 1000),
            bytes_received=max(1, self.sent // 2),
        )


@settings(max_examples=80, deadline=None)
@given(data=st.data())
def test_a_producer_writing_at_its_interval_is_never_silent(data: st.DataObject) -> None:
    smallest = data.draw(st.sampled_from([MIN_WRITE_BYTES, MIN_WRITE_BYTES_V3]))
    classifier = SocketClassifier()
    conns: dict[int, _Conn] = {1: _Conn(40001, 1)}
    at, next_port, last_write = 0.0, 40002, 0.0
    look(classifier, at, conns[1].tcp(at), smallest=smallest)
    for _ in range(data.draw(st.integers(5, 25))):
        gap = data.draw(st.floats(0.2, ROUND))
        # between two snapshots: maybe a write (always before the interval minus a round
        # has passed), small requests, closes and reconnects, in any order
        events = data.draw(
            st.lists(st.sampled_from(["write", "small", "close", "open", "flash"]), max_size=6)
        )
        if at + gap - last_write > INTERVAL - ROUND and not {"write", "flash"} & set(events):
            events.append(data.draw(st.sampled_from(["write", "flash"])))
        closed: list[ClosedConnection] = []
        for event in events:
            when = at + data.draw(st.floats(0.0, gap))
            if event == "flash":  # opened, written on and closed by the producer, unseen
                name = f"10.0.0.9:{next_port}->10.0.0.1:9092"
                closed.append(ClosedConnection(name, at + gap - when))
                next_port += 1
                last_write = max(last_write, when)
                continue
            if event == "open" or not conns:
                conns[next_port] = _Conn(next_port, data.draw(st.integers(1, 3)), last_sent=when)
                next_port += 1
            if event == "close":
                closable = [p for p, c in conns.items() if not c.must_be_seen]
                if closable:
                    del conns[data.draw(st.sampled_from(closable))]
                continue
            target = conns[data.draw(st.sampled_from(sorted(conns)))]
            if event == "write":
                target.sent += smallest + data.draw(st.integers(0, 5000))
                target.must_be_seen = True
                last_write = max(last_write, when)
            else:
                target.sent += data.draw(st.integers(MIN_REQUEST_BYTES, 40))
            target.segments += 1
            target.last_sent = max(target.last_sent, when)
        at += gap
        view = classifier.observe(
            SocketSnapshot(at=at, connections=tuple(c.tcp(at) for c in conns.values()),
                           closed=tuple(closed)),
            BROKERS, 5.0, smallest_write=smallest,
        )  # fmt: skip
        for c in conns.values():
            c.must_be_seen = False
        assert Verdict.PRODUCER_SILENT not in silence(view), (at, last_write, view.writes)


# -- /status -------------------------------------------------------------------------------------


def test_status_carries_the_memory_of_writes() -> None:
    doc = status_document(SidecarState(started_ts=1.0, sockets=_stuck_with_no_connection_left()))
    decoded = status.decode(status.encode(doc))
    assert decoded.sockets is not None
    assert decoded.sockets.last_write_seconds == 13.0
    assert decoded.sockets.closed_since_write == 2
    assert decoded.sockets.not_writes_since_write == 1
    assert decoded.sockets.connections_total == 0
