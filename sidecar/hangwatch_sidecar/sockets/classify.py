"""Turns socket snapshots into evidence per connection and per broker (pure).

Fed by the loop with each `SocketSnapshot` from `sockets.reader`, the broker address
book (`ip:port` -> the broker's name) and the stall threshold. `tcp_info` already says
how long ago data last moved, so most patterns come from one snapshot; what needs
memory is how long a request has been outstanding: the kernel only tells when the
*last* data was sent, so the classifier remembers, per connection, since when data sent
after the last answer has been waiting (a lower bound, as precise as the snapshot
cadence). Patterns (`types.Pattern`):

- `unanswered`: data sent after the last data received, every byte acknowledged by the
  broker's TCP, nothing received for the stall threshold (S2, for any client);
- `blackholed`: unacknowledged data retransmitted twice in a row or more (S0, S3);
- `connect_unanswered`: a SYN retransmitted, i.e. unanswered past a second (S0, S3);
- `idle` / `answered`: nothing outstanding (an idle connection is never a hang).

It also remembers, for the whole pod, when its connections last sent something that can
hold a write (`types.WriteMemory`): a silence of writes must outlive the connections it
was seen on (brokers close idle connections, `connections.max.idle.ms`), and traffic that
is no write (a periodic metadata refresh, a reconnect's handshake) must not end it. What
tells them apart, from `tcp_info` alone and without a capability: the bytes a connection
sent since the previous snapshot and in how many segments. Kafka's smallest write (a
Produce request carrying one record) has `MIN_WRITE_BYTES` (`MIN_WRITE_BYTES_V3` once the
brokers refuse Produce below v3: Apache Kafka 4's floor, told by its Fetch floor); every
Kafka request has at least `MIN_REQUEST_BYTES`, and a client writes each request whole, so
a connection's sends of `bytes` in `segments` held a write only if
`bytes - MIN_REQUEST_BYTES * (segments - 1)` reaches the smallest write. Anything larger
counts as a write (first, do no harm: a healthy producer's write is never taken for
silence); docs/uninstrumented.md says what that leaves unseen.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from hangwatch_sidecar.sockets.types import (
    ConnectionEvidence,
    Pattern,
    SocketObservation,
    SocketSnapshot,
    TcpConnection,
    TcpState,
    WriteMemory,
)

BLACKHOLE_RETRANSMITS = 2
"""Consecutive retransmission timeouts of unacknowledged data that make a blackhole: one
can be a lost packet, two in a row (at least three RTOs, 600 ms on loopback and more on
real networks) with nothing acknowledged is a path that drops everything."""

SYN_RETRANSMITS = 1
"""A SYN retransmitted once has been unanswered for the initial RTO of one second."""

ANSWERED_WITHIN_SECONDS = 1.0
"""A connection that received data this recently, with nothing outstanding, `answered`."""

MIN_REQUEST_BYTES = 14
"""The smallest Kafka request on the wire: its 4-byte size, a request header v1 with a
null client id (10 bytes) and an empty body (ApiVersions v0-v2)."""

MIN_WRITE_BYTES = 65
"""The smallest Produce request that carries a record, in any version a broker may take:
Produce v0 with its size and a header with a null client id (14 bytes), acks, timeout,
one topic of one character and one partition (27), the message set's size and one v0
message with neither key nor value (4 + 26)."""

MIN_WRITE_BYTES_V3 = 102
"""The smallest Produce request that carries a record once the brokers refuse Produce
below v3 (Apache Kafka 4.0 removed v0-v2: KIP-896): a record batch (a 61-byte header and
one 7-byte record) in Produce v9's flexible encoding, the smallest of v3 onwards (v3-v8:
109 bytes; v13, with a topic id for the name: 116)."""

KAFKA_4_FETCH_FLOOR = 4
"""The lowest Fetch version Apache Kafka 4.0 lists in its ApiVersions answer (KIP-896
removed Fetch v0-v3). Its Produce floor is v3, though that answer still lists Produce v0
(KAFKA-18659: librdkafka chose compression by it), so the Fetch floor is what tells a
broker that refuses every write smaller than a record batch."""


def min_write_bytes(fetch_floors: Iterable[int | None]) -> int:
    """The smallest write the brokers accept, from the lowest Fetch version each broker
    lists (None: not known yet): `MIN_WRITE_BYTES_V3` only when every broker is known to
    have Apache Kafka 4's floor."""
    floors = list(fetch_floors)
    if floors and all(f is not None and f >= KAFKA_4_FETCH_FLOOR for f in floors):
        return MIN_WRITE_BYTES_V3
    return MIN_WRITE_BYTES


def holds_no_write(sent_bytes: int, segments: int, smallest_write: int) -> bool:
    """Sends of `sent_bytes` in `segments` data segments (0: not known) cannot have held a
    write of at least `smallest_write` bytes: a client writes each request whole, so the
    largest request among them is at most what is left once every other segment holds the
    smallest request."""
    others = max(0, segments - 1)
    return sent_bytes - MIN_REQUEST_BYTES * others < smallest_write


@dataclass
class _Sends:
    """What one connection had sent at the previous snapshot."""

    sent: int
    """Bytes sent (retransmissions included; bytes acknowledged where the kernel does not
    count sent bytes, before Linux 4.19)."""
    segments: int


@dataclass
class _Waiting:
    received: int
    """bytes_received when the wait was first seen; the wait ends when it grows."""
    since: float


def _ms(value: int) -> float:
    return value / 1000.0


def _sends(c: TcpConnection) -> _Sends:
    return _Sends(c.bytes_sent or c.bytes_acked, c.data_segs_out)


def _outstanding(c: TcpConnection) -> bool:
    """Data was sent after the last data received (or ever, if nothing was received)."""
    if c.bytes_sent <= 0:
        return False
    if c.bytes_received == 0:
        return True
    return c.last_data_sent_ms < c.last_data_recv_ms


class SocketClassifier:
    """Evidence from snapshots; remembers outstanding requests and the namespace counter."""

    def __init__(self) -> None:
        self._waiting: dict[str, _Waiting] = {}
        self._attempt_fails: int | None = None
        self._attempt_at: float | None = None
        self._sends: dict[str, _Sends] = {}
        self._last_write: float | None = None
        """When the pod's connections last sent something that can hold a write (the
        sidecar's clock); None until a connection of the pod was seen."""
        self._closed = 0
        self._not_writes = 0
        self._closes: set[str] = set()
        """Connections in TIME_WAIT at the previous snapshot (closed by this side)."""

    def observe(
        self,
        snapshot: SocketSnapshot,
        brokers: Mapping[str, str],
        stall_seconds: float,
        own_failed_connects: int = 0,
        smallest_write: int = MIN_WRITE_BYTES,
    ) -> SocketObservation:
        """The observation of `snapshot`; `brokers` maps `ip:port` to the broker's name
        (connections to other peers are ignored), `own_failed_connects` is how many of the
        sidecar's own connects failed since the previous snapshot, `smallest_write` the
        bytes of the smallest write the brokers accept (`min_write_bytes`)."""
        failed, window = self._failed_connects(snapshot, own_failed_connects)
        if snapshot.error is not None:
            self._waiting.clear()
            return SocketObservation(at=snapshot.at, error=snapshot.error)
        evidence = []
        for c in snapshot.connections:
            broker = brokers.get(c.peer)
            if broker is not None:
                evidence.append(self._connection(c, broker, snapshot.at, stall_seconds))
        present = {c.name for c in snapshot.connections}
        self._waiting = {k: w for k, w in self._waiting.items() if k in present}
        answered: dict[str, float] = {}
        for e in evidence:
            if e.last_received_seconds is not None and e.pattern is not Pattern.BLACKHOLED:
                previous = answered.get(e.broker, float("inf"))
                answered[e.broker] = min(previous, e.last_received_seconds)
        kept = [c for c in snapshot.connections if c.peer in brokers]
        return SocketObservation(
            at=snapshot.at,
            connections=tuple(sorted(evidence, key=lambda e: (e.broker, e.connection))),
            failed_connects=failed,
            failed_connects_seconds=window,
            answered_brokers=answered,
            writes=self._writes(kept, evidence, snapshot, smallest_write),
        )

    def _writes(
        self,
        connections: list[TcpConnection],
        evidence: list[ConnectionEvidence],
        snapshot: SocketSnapshot,
        smallest_write: int,
    ) -> WriteMemory | None:
        """The pod's silence of writes, kept across closed connections and reconnects."""
        at = snapshot.at
        present = {c.name for c in connections}
        self._closed += sum(1 for name in self._sends if name not in present)
        # a connection this side closed since the previous snapshot may have held a write
        # no snapshot saw (opened, written and closed between two): a possible write
        closed_now = {c.name: at - c.closed_seconds for c in snapshot.closed}
        new_closes = [when for name, when in closed_now.items() if name not in self._closes]
        self._closes = set(closed_now)
        if self._last_write is None:
            if not connections and not closed_now:
                return None
            # First sight: nothing older than what the kernel says moved last on any of
            # them (the socket view's silence until now), their counters the baseline.
            moved = [at - e.quiet_seconds for e in evidence] + list(closed_now.values())
            self._last_write = max(moved)
            self._sends = {c.name: _sends(c) for c in connections}
            self._closed = 0
            return WriteMemory(max(0.0, at - self._last_write))
        for when in new_closes:
            self._wrote(when)
        for c in connections:
            before = self._sends.get(c.name)
            now = self._sends[c.name] = _sends(c)
            if before is None or now.sent < before.sent or now.segments < before.segments:
                before = _Sends(0, 0)  # new (or a reused name): all it sent is new
            sent, segments = now.sent - before.sent, now.segments - before.segments
            if sent <= 0 and segments <= 0:
                continue
            if sent > 0 and holds_no_write(sent, segments, smallest_write):
                self._not_writes += 1
                continue
            self._wrote(at - _ms(c.last_data_sent_ms))
        self._sends = {k: v for k, v in self._sends.items() if k in present}
        return WriteMemory(max(0.0, at - self._last_write), self._closed, self._not_writes)

    def _wrote(self, when: float) -> None:
        if self._last_write is None or when > self._last_write:
            self._last_write = when
            self._closed = self._not_writes = 0

    def _failed_connects(self, snapshot: SocketSnapshot, own: int) -> tuple[int | None, float]:
        previous, previous_at = self._attempt_fails, self._attempt_at
        self._attempt_fails, self._attempt_at = snapshot.attempt_fails, snapshot.at
        if snapshot.attempt_fails is None or previous is None or previous_at is None:
            return None, 0.0
        delta = snapshot.attempt_fails - previous
        if delta < 0:  # counter reset (a new namespace?): no judgement this round
            return None, 0.0
        return max(0, delta - max(0, own)), max(0.0, snapshot.at - previous_at)

    def _connection(
        self, c: TcpConnection, broker: str, at: float, stall_seconds: float
    ) -> ConnectionEvidence:
        received = _ms(c.last_data_recv_ms) if c.bytes_received > 0 else None
        quiet = min(_ms(c.last_data_sent_ms), _ms(c.last_data_recv_ms))
        if c.bytes_sent == 0 and c.bytes_received == 0:
            quiet = _ms(c.last_data_recv_ms)  # since set-up
        waiting: float | None = None
        if c.state is TcpState.SYN_SENT:
            pattern = (
                Pattern.CONNECT_UNANSWERED
                if c.retransmits >= SYN_RETRANSMITS
                else Pattern.CONNECTING
            )
        elif c.state is not TcpState.ESTABLISHED:
            pattern = Pattern.CLOSING
        elif _outstanding(c):
            waiting = self._wait(c, at)
            if c.unacked > 0 and c.retransmits >= BLACKHOLE_RETRANSMITS:
                pattern = Pattern.BLACKHOLED
            elif c.unacked == 0 and waiting >= stall_seconds:
                pattern = Pattern.UNANSWERED
            else:
                pattern = Pattern.AWAITING
        else:
            self._waiting.pop(c.name, None)
            recent = received is not None and received < ANSWERED_WITHIN_SECONDS
            pattern = Pattern.ANSWERED if recent else Pattern.IDLE
        return ConnectionEvidence(
            connection=c.name,
            broker=broker,
            pattern=pattern,
            state=c.state,
            uid=c.uid,
            waiting_seconds=waiting,
            quiet_seconds=quiet,
            last_received_seconds=received,
            unacked=c.unacked,
            retransmits=c.retransmits,
            backoff=c.backoff,
            inode=c.inode,
        )

    def _wait(self, c: TcpConnection, at: float) -> float:
        """Seconds the oldest outstanding request has waited (lower bound)."""
        started = at - _ms(c.last_data_sent_ms)
        memory = self._waiting.get(c.name)
        if memory is None or memory.received != c.bytes_received:
            memory = self._waiting[c.name] = _Waiting(c.bytes_received, started)
        memory.since = min(memory.since, started)
        return max(0.0, at - memory.since)
