"""Takes socket snapshots: sock_diag netlink through pyroute2, and the namespace's TCP counters.

Called by the sidecar's loop once per round with the broker addresses (`ip:port`) to
keep. One netlink dump (`SOCK_DIAG_BY_FAMILY` with `INET_DIAG_INFO`: the kernel's
`tcp_info` per socket) per address family lists every TCP socket of the network
namespace; those whose peer is a broker address are kept, minus the sidecar's own
(socket inodes held by this process, read from /proc/self/fd: its probe and metadata
connections) and minus what the policy's narrowing leaves out (broker ports, socket
owners, and with `--socket-process` every socket no process of one tree holds:
`sockets.owners`). `Tcp: AttemptFails` of /proc/net/snmp counts the namespace's failed connects.

No capability is needed: the kernel answers sock_diag dumps of the caller's own network
namespace to any user (the sidecar shares the pod's). Failures never raise: the
snapshot carries an `error` and the verdict engine ignores the view that round.

Cost: the kernel filters the dump (established and connecting sockets whose remote port
is a broker's, through an inet_diag bytecode filter pyroute2 passes along), so only a
pod's few Kafka connections are decoded in Python, however many sockets the pod has.
"""

from __future__ import annotations

import socket
import struct
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyroute2 import DiagSocket
from pyroute2.netlink import NLM_F_MATCH, NLM_F_REQUEST, NLM_F_ROOT
from pyroute2.netlink.diag import SOCK_DIAG_BY_FAMILY, inet_diag_req

from hangwatch_sidecar.probe.settings import Endpoint
from hangwatch_sidecar.sockets.owners import (
    PROC,
    ProcessRoot,
    ProcessTreeError,
    socket_inodes,
    tree_socket_inodes,
)
from hangwatch_sidecar.sockets.types import (
    ClosedConnection,
    SocketSnapshot,
    TcpConnection,
    TcpState,
)

INET_DIAG_INFO = 2
"""The `tcp_info` extension of an inet_diag dump (bit INET_DIAG_INFO - 1 of `idiag_ext`)."""

SNMP_PATH = Path("/proc/net/snmp")
SELF_FD = Path("/proc/self/fd")

STATES = (
    (1 << TcpState.from_kernel_name("established"))
    | (1 << TcpState.from_kernel_name("syn_sent"))
    | (1 << TcpState.from_kernel_name("time_wait"))
)
"""Socket states dumped: established connections and connects under way (the patterns
the classifier judges), and connections this side closed (TIME_WAIT: they may have held
a write no snapshot saw). Other closing states carry nothing to judge."""

TIME_WAIT_SECONDS = 60.0
"""How long Linux keeps a closed connection in TIME_WAIT (`TCP_TIMEWAIT_LEN`)."""
OWN_MEMORY_SECONDS = 2 * TIME_WAIT_SECONDS
"""How long the names of the sidecar's own connections are remembered: its own closed
connections (in TIME_WAIT, ownerless) are told apart by them."""

MAX_PORTS = 64
"""Broker ports put in the kernel filter at most; beyond, every port is dumped."""

MAX_CONNECTIONS = 512
"""Connections to brokers kept per snapshot at most (a pod has a handful; bounded memory)."""


@dataclass(frozen=True)
class Narrowing:
    """What the policy leaves in the view: broker ports, socket owners (empty: all) and the
    process tree whose sockets count (None: every process)."""

    ports: frozenset[int] = field(default_factory=frozenset)
    uids: frozenset[int] = field(default_factory=frozenset)
    process: ProcessRoot | None = None

    def keeps(self, peer_port: int, uid: int) -> bool:
        return (not self.ports or peer_port in self.ports) and (not self.uids or uid in self.uids)


def own_socket_inodes(fd_dir: Path = SELF_FD) -> frozenset[int]:
    """Inodes of the sockets this process holds (its probe and metadata connections)."""
    try:
        return socket_inodes(fd_dir)
    except OSError:
        return frozenset()


def attempt_fails(text: str) -> int | None:
    """`Tcp: AttemptFails` from the text of /proc/net/snmp, None if absent or malformed."""
    lines = [line.split() for line in text.splitlines() if line.startswith("Tcp:")]
    if len(lines) < 2:
        return None
    names, values = lines[0], lines[1]
    try:
        return int(values[names.index("AttemptFails")])
    except (ValueError, IndexError):
        return None


class _FilteredRequest(inet_diag_req):  # type: ignore[misc]
    """An inet_diag dump request that carries a bytecode filter (`INET_DIAG_REQ_BYTECODE`)."""

    nla_map = (("INET_DIAG_REQ_NONE", "none"), ("INET_DIAG_REQ_BYTECODE", "cdata"))


_OP = struct.Struct("=BBH")
_BC_JMP, _BC_D_GE, _BC_D_LE = 1, 4, 5


def remote_port_filter(ports: Collection[int]) -> bytes:
    """inet_diag bytecode accepting sockets whose remote port is one of `ports`.

    Per port `P`: `dport >= P` then `dport <= P` (both true: jump to the end, accept;
    either false: on to the next port); a JMP op chains the ports, as `ss` compiles an
    OR, so every jump target lies on the kernel auditor's path. The last port's false
    branch jumps 4 bytes past the end: reject."""
    ordered = sorted(set(ports))
    out = b""
    for i, port in enumerate(ordered):
        out += _OP.pack(_BC_D_GE, 8, 20) + _OP.pack(0, 0, port)
        out += _OP.pack(_BC_D_LE, 8, 12) + _OP.pack(0, 0, port)
        remaining = len(ordered) - 1 - i
        if remaining:
            out += _OP.pack(_BC_JMP, 4, 20 * remaining)
    return out


def _unmapped(ip: str) -> str:
    """`::ffff:10.0.0.1` (an IPv4 peer of a dual-stack socket) as `10.0.0.1`."""
    return ip[7:] if ip.startswith("::ffff:") and "." in ip else ip


def _name(message: Any) -> str:
    local = Endpoint(_unmapped(str(message["idiag_src"])), int(message["idiag_sport"]))
    peer = Endpoint(_unmapped(str(message["idiag_dst"])), int(message["idiag_dport"]))
    return f"{local}->{peer}"


def closed_from_diag(message: Any) -> ClosedConnection | None:
    """A `ClosedConnection` from one inet_diag message of a TIME_WAIT socket, else None."""
    if int(message["idiag_state"]) != TcpState.from_kernel_name("time_wait"):
        return None
    left = int(message["idiag_expires"] or 0) / 1000.0
    return ClosedConnection(_name(message), max(0.0, TIME_WAIT_SECONDS - left))


def connection_from_diag(message: Any) -> TcpConnection | None:
    """A `TcpConnection` from one pyroute2 inet_diag message; None without tcp_info."""
    info = message.get_attr("INET_DIAG_INFO")
    if info is None:
        return None
    try:
        state = TcpState.from_kernel(int(message["idiag_state"]))
    except ValueError:
        return None
    return TcpConnection(
        local=str(Endpoint(_unmapped(str(message["idiag_src"])), int(message["idiag_sport"]))),
        peer=str(Endpoint(_unmapped(str(message["idiag_dst"])), int(message["idiag_dport"]))),
        state=state,
        inode=int(message["idiag_inode"]),
        uid=int(message["idiag_uid"]),
        last_data_sent_ms=int(info["tcpi_last_data_sent"]),
        last_data_recv_ms=int(info["tcpi_last_data_recv"]),
        last_ack_recv_ms=int(info["tcpi_last_ack_recv"]),
        bytes_sent=int(info.get("tcpi_bytes_sent") or 0),
        bytes_acked=int(info.get("tcpi_bytes_acked") or 0),
        bytes_received=int(info.get("tcpi_bytes_received") or 0),
        unacked=int(info["tcpi_unacked"]),
        retransmits=int(info["tcpi_retransmits"]),
        backoff=int(info["tcpi_backoff"]),
        total_retrans=int(info["tcpi_total_retrans"]),
        rtt_ms=int(info["tcpi_rtt"]) / 1000.0,
        data_segs_out=int(info.get("tcpi_data_segs_out") or 0),
    )


class SocketReader:
    """Snapshots of the namespace's TCP connections to broker addresses."""

    def __init__(
        self,
        narrowing: Narrowing | None = None,
        *,
        exclude_own: bool = True,
        snmp_path: Path = SNMP_PATH,
        proc: Path = PROC,
    ) -> None:
        self.narrowing = narrowing or Narrowing()
        self.exclude_own = exclude_own
        self.snmp_path = snmp_path
        self.proc = proc
        self._own_names: dict[str, float] = {}
        """Names of the sidecar's own connections -> when last seen open."""

    def _dump(self, ports: Collection[int]) -> list[Any]:
        """Established and connecting TCP sockets of both families whose remote port is in
        `ports` (all ports when there are too many for the filter)."""
        messages: list[Any] = []
        with DiagSocket() as diag:
            diag.bind()
            for family in (socket.AF_INET, socket.AF_INET6):
                request = _FilteredRequest()
                request["sdiag_family"] = family
                request["sdiag_protocol"] = socket.IPPROTO_TCP
                request["idiag_ext"] = 1 << (INET_DIAG_INFO - 1)
                request["idiag_states"] = STATES
                request["idiag_src"] = request["idiag_dst"] = 0
                if 0 < len(ports) <= MAX_PORTS:
                    request["attrs"] = [["INET_DIAG_REQ_BYTECODE", remote_port_filter(ports)]]
                for message in diag.nlm_request(
                    request, SOCK_DIAG_BY_FAMILY, NLM_F_REQUEST | NLM_F_ROOT | NLM_F_MATCH
                ):
                    if "idiag_dport" not in message:  # the kernel refused the request
                        raise OSError(0, "the kernel refused the sock_diag request")
                    messages.append(message)
        return messages

    def _counter(self) -> int | None:
        try:
            return attempt_fails(self.snmp_path.read_text())
        except OSError:
            return None

    def snapshot(self, at: float, peers: Collection[str]) -> SocketSnapshot:
        """Connections whose peer is one of `peers` (`ip:port`), taken now; never raises."""
        fails = self._counter()
        own = own_socket_inodes() if self.exclude_own else frozenset()
        wanted = set(peers)
        if not wanted:
            return SocketSnapshot(at=at, attempt_fails=fails)
        try:
            messages = self._dump({int(p.rsplit(":", 1)[1]) for p in wanted})
        except Exception as exc:  # noqa: BLE001 - netlink errors vary; the view is optional
            return SocketSnapshot(at=at, attempt_fails=fails, error=_why(exc))
        tree: frozenset[int] | None = None
        if self.narrowing.process is not None:
            try:  # after the dump: a socket the tree opened meanwhile is still found
                tree = tree_socket_inodes(self.narrowing.process, self.proc)
            except ProcessTreeError as exc:
                return SocketSnapshot(at=at, attempt_fails=fails, error=str(exc))
        kept = self.narrow(_parse(messages), peers, own, tree)
        return SocketSnapshot(
            at=at,
            connections=tuple(kept[:MAX_CONNECTIONS]),
            attempt_fails=fails,
            sockets_seen=len(messages),
            closed=self._closed(messages, at, own, wanted),
        )

    def closing_own(self, sock: socket.socket, at: float) -> None:
        """The sidecar is about to close `sock`, one of its own connections: its TIME_WAIT
        is its own, not a connection of the pod's producers."""
        try:
            local, peer = sock.getsockname(), sock.getpeername()
        except OSError:
            return
        name = (
            f"{Endpoint(_unmapped(str(local[0])), int(local[1]))}->"
            f"{Endpoint(_unmapped(str(peer[0])), int(peer[1]))}"
        )
        self._own_names[name] = at

    def _closed(
        self, messages: list[Any], at: float, own: frozenset[int], peers: set[str]
    ) -> tuple[ClosedConnection, ...]:
        """The connections to `peers` this side closed within the last minute, but the
        sidecar's own (known by their names while they were open) and, with the view
        narrowed to a process tree, none (a closed connection has no owner left)."""
        for message in messages:
            if int(message["idiag_inode"]) in own:
                self._own_names[_name(message)] = at
        self._own_names = {n: t for n, t in self._own_names.items() if at - t <= OWN_MEMORY_SECONDS}
        if self.narrowing.process is not None:
            return ()
        found = []
        for message in messages:
            closed = closed_from_diag(message)
            if closed is None or closed.name in self._own_names:
                continue
            peer = closed.name.split("->", 1)[1]
            ports = self.narrowing.ports
            # no owner to narrow by user: counted whoever closed it (it may have been a write)
            if peer in peers and (not ports or int(peer.rsplit(":", 1)[1]) in ports):
                found.append(closed)
        return tuple(found[:MAX_CONNECTIONS])

    def narrow(
        self,
        connections: Iterable[TcpConnection],
        peers: Collection[str],
        own: frozenset[int],
        tree: frozenset[int] | None = None,
    ) -> list[TcpConnection]:
        """Connections to `peers` that are not the sidecar's own, the policy keeps and (when
        `tree` is given: the socket inodes of the narrowing's process tree) the tree holds."""
        wanted = set(peers)
        return [
            c
            for c in connections
            if c.peer in wanted
            and (c.inode == 0 or c.inode not in own)
            and (tree is None or c.inode in tree)
            and self.narrowing.keeps(int(c.peer.rsplit(":", 1)[1]), c.uid)
        ]


def _parse(messages: Iterable[Any]) -> list[TcpConnection]:
    found = []
    for message in messages:
        connection = connection_from_diag(message)
        if connection is not None:
            found.append(connection)
    return found


def _why(exc: Exception) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return f"sock_diag netlink unavailable: {exc.strerror}"
    return f"sock_diag netlink failed: {type(exc).__name__}"
