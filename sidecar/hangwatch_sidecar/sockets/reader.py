"""Takes socket snapshots: sock_diag netlink through pyroute2, and the namespace's TCP counters.

Called by the sidecar's loop once per round with the broker addresses (`ip:port`) to
keep. One netlink dump (`SOCK_DIAG_BY_FAMILY` with `INET_DIAG_INFO`: the kernel's
`tcp_info` per socket) per address family lists every TCP socket of the network
namespace; those whose peer is a broker address are kept, minus the sidecar's own
(socket inodes held by this process, read from /proc/self/fd: its probe and metadata
connections) and minus what the policy's narrowing leaves out (broker ports, socket
owners). `Tcp: AttemptFails` of /proc/net/snmp counts the namespace's failed connects.

No capability is needed: the kernel answers sock_diag dumps of the caller's own network
namespace to any user (the sidecar shares the pod's). Failures never raise: the
snapshot carries an `error` and the verdict engine ignores the view that round.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyroute2 import DiagSocket
from pyroute2.netlink.diag import SS_ALL

from hangwatch_sidecar.sockets.types import SocketSnapshot, TcpConnection, TcpState

INET_DIAG_INFO = 2
"""The `tcp_info` extension of an inet_diag dump (bit INET_DIAG_INFO - 1 of `idiag_ext`)."""

SNMP_PATH = Path("/proc/net/snmp")
SELF_FD = Path("/proc/self/fd")

MAX_CONNECTIONS = 512
"""Connections to brokers kept per snapshot at most (a pod has a handful; bounded memory)."""


@dataclass(frozen=True)
class Narrowing:
    """What the policy leaves in the view: broker ports and socket owners (empty: all)."""

    ports: frozenset[int] = field(default_factory=frozenset)
    uids: frozenset[int] = field(default_factory=frozenset)

    def keeps(self, peer_port: int, uid: int) -> bool:
        return (not self.ports or peer_port in self.ports) and (not self.uids or uid in self.uids)


def own_socket_inodes(fd_dir: Path = SELF_FD) -> frozenset[int]:
    """Inodes of the sockets this process holds (its probe and metadata connections)."""
    inodes = set()
    try:
        entries = list(os.scandir(fd_dir))
    except OSError:
        return frozenset()
    for entry in entries:
        try:
            target = os.readlink(entry.path)
        except OSError:
            continue  # closed meanwhile
        if target.startswith("socket:["):
            inodes.add(int(target[8:-1]))
    return frozenset(inodes)


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


def _endpoint(ip: str, port: int) -> str:
    return f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}"


def _unmapped(ip: str) -> str:
    """`::ffff:10.0.0.1` (an IPv4 peer of a dual-stack socket) as `10.0.0.1`."""
    return ip[7:] if ip.startswith("::ffff:") and "." in ip else ip


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
        local=_endpoint(_unmapped(str(message["idiag_src"])), int(message["idiag_sport"])),
        peer=_endpoint(_unmapped(str(message["idiag_dst"])), int(message["idiag_dport"])),
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
    )


class SocketReader:
    """Snapshots of the namespace's TCP connections to broker addresses."""

    def __init__(
        self,
        narrowing: Narrowing | None = None,
        *,
        exclude_own: bool = True,
        snmp_path: Path = SNMP_PATH,
    ) -> None:
        self.narrowing = narrowing or Narrowing()
        self.exclude_own = exclude_own
        self.snmp_path = snmp_path

    def _dump(self) -> list[Any]:
        messages: list[Any] = []
        with DiagSocket() as diag:
            diag.bind()
            for family in (socket.AF_INET, socket.AF_INET6):
                messages += diag.get_sock_stats(
                    family=family, states=SS_ALL, extensions=1 << (INET_DIAG_INFO - 1)
                )
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
        try:
            messages = self._dump()
        except Exception as exc:  # noqa: BLE001 - netlink errors vary; the view is optional
            return SocketSnapshot(at=at, attempt_fails=fails, error=_why(exc))
        kept = self.narrow(_parse(messages), peers, own)
        return SocketSnapshot(
            at=at,
            connections=tuple(kept[:MAX_CONNECTIONS]),
            attempt_fails=fails,
            sockets_seen=len(messages),
        )

    def narrow(
        self, connections: Iterable[TcpConnection], peers: Collection[str], own: frozenset[int]
    ) -> list[TcpConnection]:
        """Connections to `peers` that are not the sidecar's own and the policy keeps."""
        wanted = set(peers)
        return [
            c
            for c in connections
            if c.peer in wanted
            and (c.inode == 0 or c.inode not in own)
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
