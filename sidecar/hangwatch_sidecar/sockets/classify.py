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
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from hangwatch_sidecar.sockets.types import (
    ConnectionEvidence,
    Pattern,
    SocketObservation,
    SocketSnapshot,
    TcpConnection,
    TcpState,
)

BLACKHOLE_RETRANSMITS = 2
"""Consecutive retransmission timeouts of unacknowledged data that make a blackhole: one
can be a lost packet, two in a row (at least three RTOs, 600 ms on loopback and more on
real networks) with nothing acknowledged is a path that drops everything."""

SYN_RETRANSMITS = 1
"""A SYN retransmitted once has been unanswered for the initial RTO of one second."""

ANSWERED_WITHIN_SECONDS = 1.0
"""A connection that received data this recently, with nothing outstanding, `answered`."""


@dataclass
class _Waiting:
    received: int
    """bytes_received when the wait was first seen; the wait ends when it grows."""
    since: float


def _ms(value: int) -> float:
    return value / 1000.0


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

    def observe(
        self,
        snapshot: SocketSnapshot,
        brokers: Mapping[str, str],
        stall_seconds: float,
        own_failed_connects: int = 0,
    ) -> SocketObservation:
        """The observation of `snapshot`; `brokers` maps `ip:port` to the broker's name
        (connections to other peers are ignored), `own_failed_connects` is how many of the
        sidecar's own connects failed since the previous snapshot."""
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
        return SocketObservation(
            at=snapshot.at,
            connections=tuple(sorted(evidence, key=lambda e: (e.broker, e.connection))),
            failed_connects=failed,
            failed_connects_seconds=window,
            answered_brokers=answered,
        )

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
        )

    def _wait(self, c: TcpConnection, at: float) -> float:
        """Seconds the oldest outstanding request has waited (lower bound)."""
        started = at - _ms(c.last_data_sent_ms)
        memory = self._waiting.get(c.name)
        if memory is None or memory.received != c.bytes_received:
            memory = self._waiting[c.name] = _Waiting(c.bytes_received, started)
        memory.since = min(memory.since, started)
        return max(0.0, at - memory.since)
