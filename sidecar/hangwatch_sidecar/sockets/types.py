"""Plain data of the socket view: kernel TCP state of one connection, a snapshot, evidence.

Produced by `sockets.reader` (snapshots) and `sockets.classify` (evidence), read by the
pure judging modules. Times in a snapshot are the kernel's "milliseconds since" counters
of `struct tcp_info`; `at` is the sidecar's monotonic clock. No I/O here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum


class TcpState(StrEnum):
    """TCP states of `include/net/tcp_states.h`, by kernel number (1..11)."""

    ESTABLISHED = "established"
    SYN_SENT = "syn_sent"
    SYN_RECV = "syn_recv"
    FIN_WAIT1 = "fin_wait1"
    FIN_WAIT2 = "fin_wait2"
    TIME_WAIT = "time_wait"
    CLOSE = "close"
    CLOSE_WAIT = "close_wait"
    LAST_ACK = "last_ack"
    LISTEN = "listen"
    CLOSING = "closing"

    @classmethod
    def from_kernel_name(cls, name: str) -> int:
        """The kernel number of the state named `name` (`established` -> 1)."""
        return list(cls).index(cls(name)) + 1

    @classmethod
    def from_kernel(cls, number: int) -> TcpState:
        """The state of kernel number `number`; ValueError outside 1..11."""
        members = list(cls)
        if not 1 <= number <= len(members):
            raise ValueError(f"unknown TCP state number {number}")
        return members[number - 1]


@dataclass(frozen=True)
class TcpConnection:
    """One TCP socket of the namespace whose peer is a broker address, from `tcp_info`."""

    local: str
    """`ip:port` of this end."""
    peer: str
    """`ip:port` of the broker end."""
    state: TcpState
    inode: int
    """Socket inode (0 once no process holds it): tells the sidecar's own sockets apart."""
    uid: int
    """Owner of the socket (the process that created it runs as this user)."""
    last_data_sent_ms: int
    last_data_recv_ms: int
    """Time since data last arrived; for a connection that never received any, time since
    it was set up (the kernel starts the clock there): read `bytes_received` with it."""
    last_ack_recv_ms: int
    bytes_sent: int
    bytes_acked: int
    bytes_received: int
    unacked: int
    """Segments sent and not yet acknowledged by the peer's TCP."""
    retransmits: int
    """Consecutive retransmission timeouts of the oldest unacknowledged segment (or SYN)."""
    backoff: int
    """Exponential backoff steps of the retransmission timer."""
    total_retrans: int = 0
    rtt_ms: float = 0.0
    data_segs_out: int = 0
    """Segments carrying data sent so far, retransmissions included (0: the kernel does not
    say, before Linux 4.6); with `bytes_sent`, how small each request sent can have been."""

    @property
    def name(self) -> str:
        return f"{self.local}->{self.peer}"


@dataclass(frozen=True)
class ClosedConnection:
    """A connection to a broker that this side closed: the kernel keeps it in TIME_WAIT
    for a minute, with neither counters nor owner. What it sent before it closed is not
    known, so it may have held a write."""

    name: str
    """`local ip:port->broker ip:port`."""
    closed_seconds: float
    """How long before the snapshot it was closed (from the TIME_WAIT timer)."""


@dataclass(frozen=True)
class SocketSnapshot:
    """Every connection to a broker address at one moment, and the namespace's counters."""

    at: float
    connections: tuple[TcpConnection, ...] = ()
    attempt_fails: int | None = None
    """The namespace's `Tcp: AttemptFails` counter (connects that failed: refused, reset
    or timed out), None when unreadable. Namespace-wide: the sidecar's own count too."""
    error: str | None = None
    """Why no snapshot could be taken (netlink unavailable...); connections are then empty."""
    sockets_seen: int = 0
    """Sockets the kernel's filtered dump returned, before narrowing."""
    closed: tuple[ClosedConnection, ...] = ()
    """Connections to brokers the pod's side closed within the last minute, the sidecar's
    own left out (empty when the view is narrowed to a process tree: a closed connection
    has no owner any more)."""


class Pattern(StrEnum):
    """What one connection shows, from the producer's side of it."""

    ANSWERED = "answered"
    """Data arrived after the last data sent: every request so far is answered."""
    IDLE = "idle"
    """Nothing sent since the last answer (or since set-up)."""
    AWAITING = "awaiting"
    """A request is outstanding, below the stall threshold."""
    UNANSWERED = "unanswered"
    """Data sent after the last data received, all acknowledged by TCP, nothing received
    for at least the stall threshold: the broker's TCP has the request, Kafka never
    answered it (S2)."""
    BLACKHOLED = "blackholed"
    """Sent data unacknowledged with retransmission backoff: nothing comes back (S0, S3)."""
    CONNECTING = "connecting"
    """SYN sent, for less than a second."""
    CONNECT_UNANSWERED = "connect_unanswered"
    """SYN sent and unanswered past a second (retransmitted): a blackholed address."""
    CLOSING = "closing"
    """Any other state (closing, closed by the broker)."""


@dataclass(frozen=True)
class ConnectionEvidence:
    """One connection of the pod to a broker, judged."""

    connection: str
    broker: str
    """The broker's address as the sidecar names it (`host:port`)."""
    pattern: Pattern
    state: TcpState
    uid: int
    waiting_seconds: float | None
    """How long the oldest outstanding request has waited (a lower bound), None if none."""
    quiet_seconds: float
    """Time since any data moved on the connection (sent or received)."""
    last_received_seconds: float | None
    """Time since data last arrived (None: never)."""
    unacked: int = 0
    retransmits: int = 0
    backoff: int = 0
    inode: int = 0
    """The socket's inode (0: no process holds it): which process holds the connection
    (`releases.processes`). Not part of /status."""

    @property
    def request_outstanding(self) -> bool:
        return self.pattern in (Pattern.AWAITING, Pattern.UNANSWERED, Pattern.BLACKHOLED)

    def as_dict(self) -> dict[str, object]:
        return {
            "connection": self.connection,
            "broker": self.broker,
            "pattern": str(self.pattern),
            "state": str(self.state),
            "uid": self.uid,
            "waiting_seconds": _round(self.waiting_seconds),
            "quiet_seconds": _round(self.quiet_seconds),
            "last_received_seconds": _round(self.last_received_seconds),
            "unacked": self.unacked,
            "retransmits": self.retransmits,
            "backoff": self.backoff,
        }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


@dataclass(frozen=True)
class WriteMemory:
    """What the pod's connections sent since the last send that could hold a write
    (`sockets.classify`): the silence of writes outlives the connections it was seen on."""

    last_write_seconds: float
    """Seconds since the pod's connections last sent something that can hold a write (a
    lower bound: a round's sends are dated by the connection's last send), or since the
    sidecar first saw a connection of the pod when none had sent anything."""
    closed: int = 0
    """Connections of the pod gone since then (closed by either side)."""
    not_writes: int = 0
    """Sends since then that cannot hold a write (a metadata refresh, a reconnect's
    handshake: fewer bytes than the smallest write), counted once per connection and round."""

    def as_dict(self) -> dict[str, object]:
        return {
            "last_write_seconds": _round(self.last_write_seconds),
            "closed_since_write": self.closed,
            "not_writes_since_write": self.not_writes,
        }


@dataclass(frozen=True)
class SocketObservation:
    """The socket view of one round, as the verdict engine reads it."""

    at: float
    connections: tuple[ConnectionEvidence, ...] = ()
    failed_connects: int | None = None
    """Connect attempts of the pod's clients that failed since the previous snapshot
    (the namespace's counter less the sidecar's own failures); None when unknown."""
    failed_connects_seconds: float = 0.0
    """The window `failed_connects` covers."""
    error: str | None = None
    """Set when the view is unavailable this round (the verdict engine ignores it then)."""
    answered_brokers: Mapping[str, float] = field(default_factory=dict)
    """Broker -> seconds since one of the pod's connections last received data from it."""
    writes: WriteMemory | None = None
    """Since when the pod's connections sent nothing that can hold a write, across closed
    connections and reconnects (None: no connection of the pod seen yet)."""

    @property
    def available(self) -> bool:
        return self.error is None

    def by_pattern(self, *patterns: Pattern) -> tuple[ConnectionEvidence, ...]:
        return tuple(c for c in self.connections if c.pattern in patterns)

    @property
    def silent_seconds(self) -> float | None:
        """Every connection idle (no request outstanding, none connecting) for at least this
        long; None when there is no connection or one is not idle."""
        if not self.connections or any(
            c.pattern not in (Pattern.IDLE, Pattern.ANSWERED) for c in self.connections
        ):
            return None
        return min(c.quiet_seconds for c in self.connections)

    @property
    def quiet_for_writes(self) -> bool:
        """No connection has a request outstanding or a connect under way (none at all
        counts): a silence of writes may be judged."""
        return all(c.pattern in (Pattern.IDLE, Pattern.ANSWERED) for c in self.connections)

    def ranked(self) -> list[ConnectionEvidence]:
        """The connections that matter first (unanswered, blackholed, connects unanswered,
        awaiting, connecting), then by broker and name."""
        return sorted(
            self.connections,
            key=lambda c: (_SHOWN_FIRST.get(c.pattern, len(_SHOWN_FIRST)), c.broker, c.connection),
        )

    def summary(self, limit: int) -> dict[str, object]:
        """The view as a verdict's evidence shows it: at most `limit` connections, ranked."""
        return {
            "available": self.available,
            "error": self.error,
            "connections_total": len(self.connections),
            "connections": [c.as_dict() for c in self.ranked()[: max(0, limit)]],
            "silent_seconds": _round(self.silent_seconds),
            "failed_connects": self.failed_connects,
            "failed_connects_seconds": round(self.failed_connects_seconds, 3),
            **(self.writes.as_dict() if self.writes is not None else {}),
        }


_SHOWN_FIRST = {
    p: i
    for i, p in enumerate(
        (
            Pattern.UNANSWERED,
            Pattern.BLACKHOLED,
            Pattern.CONNECT_UNANSWERED,
            Pattern.AWAITING,
            Pattern.CONNECTING,
        )
    )
}
