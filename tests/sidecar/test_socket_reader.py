"""The socket reader on the real kernel: sock_diag netlink through pyroute2.

Covered: a real connection to a listening socket is read with its tcp_info (state,
bytes sent, acknowledged, received, times since data moved); the reader's own process's
sockets are left out (the sidecar's probes), other processes' are kept; the policy's
narrowing by broker port and by socket owner; the reader works as an unprivileged user
with every capability dropped (what the injected sidecar has); a netlink failure becomes
the snapshot's error, never an exception; the kernel-side filter (inet_diag
bytecode on the remote port) is accepted by the kernel and keeps exactly the broker
ports asked for, one to many, and more ports than the filter holds fall back to a full
dump with the same result; /proc/net/snmp parsing of `AttemptFails`
(property-based: any text gives an int or None, never an exception); IPv4-mapped IPv6
peers are named as IPv4; a connection this side closed is listed as closed (TIME_WAIT,
with how long ago), but the sidecar's own, told to the reader before it closes it, and
none when the view is narrowed to a process tree.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hangwatch_sidecar.sockets import reader as reader_module
from hangwatch_sidecar.sockets.owners import ProcessRoot
from hangwatch_sidecar.sockets.reader import Narrowing, SocketReader, attempt_fails
from hangwatch_sidecar.sockets.types import TcpState
from tests.sidecar.unprivileged import as_user, capabilities


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen()
        yield srv


def _peer(srv: socket.socket) -> str:
    host, port = srv.getsockname()
    return f"{host}:{port}"


CLIENT = """
import socket, sys, time
c = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
c.sendall(b"x" * 100)
print("connected", flush=True)
time.sleep(30)
"""


def test_another_process_connection_is_read_with_tcp_info(listener: socket.socket) -> None:
    port = listener.getsockname()[1]
    before_send = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-c", CLIENT, str(port)], stdout=subprocess.PIPE)
    try:
        assert proc.stdout is not None and proc.stdout.readline().startswith(b"connected")
        accepted, _ = listener.accept()
        accepted.recv(100)
        time.sleep(0.05)
        snap = SocketReader().snapshot(1.0, [_peer(listener)])
        since_send_ms = (time.monotonic() - before_send) * 1000
        accepted.close()
    finally:
        proc.kill()
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
    assert snap.error is None and snap.sockets_seen > 0
    (conn,) = snap.connections
    assert conn.state is TcpState.ESTABLISHED and conn.peer == _peer(listener)
    assert conn.bytes_sent == 100 and conn.bytes_received == 0 and conn.unacked == 0
    assert conn.uid == os.getuid() and conn.inode > 0
    # the 100 bytes left after the client started: the kernel's age of them is younger
    assert 0 <= conn.last_data_sent_ms < since_send_ms
    assert isinstance(snap.attempt_fails, int)


def test_own_sockets_are_left_out_and_narrowing_applies(listener: socket.socket) -> None:
    with socket.create_connection(listener.getsockname()) as mine:
        mine.sendall(b"y")
        peers = [_peer(listener)]
        assert SocketReader().snapshot(0.0, peers).connections == ()
        assert len(SocketReader(exclude_own=False).snapshot(0.0, peers).connections) == 1
        port = listener.getsockname()[1]
        uid = os.getuid()
        for narrowing, kept in (
            (Narrowing(ports=frozenset({port})), 1),
            (Narrowing(ports=frozenset({port + 1})), 0),
            (Narrowing(uids=frozenset({uid})), 1),
            (Narrowing(uids=frozenset({uid + 1})), 0),
        ):
            r = SocketReader(narrowing, exclude_own=False)
            assert len(r.snapshot(0.0, peers).connections) == kept, narrowing
        assert SocketReader(exclude_own=False).snapshot(0.0, ["127.0.0.1:1"]).connections == ()


NOBODY = 65534


def _read_view_as_nobody() -> dict[str, object]:
    """In this process, or (as root) in a fork of it that drops to user nobody with no
    capability left: modules are already imported, so no interpreter has to find them
    in directories only root may read."""
    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen()
        with socket.create_connection(srv.getsockname()) as client:
            client.sendall(b"z")
            host, port = srv.getsockname()
            if os.geteuid() != 0:  # already unprivileged
                return _view(host, port)
            return as_user(NOBODY, lambda: _view(host, port))


def _view(host: str, port: int) -> dict[str, object]:
    snap = SocketReader(exclude_own=False).snapshot(0.0, [f"{host}:{port}"])
    return {
        "uid": os.geteuid(),
        "capabilities": capabilities(),
        "error": snap.error,
        "n": len(snap.connections),
        "fails": snap.attempt_fails,
    }


def test_an_unprivileged_user_without_capabilities_reads_the_view() -> None:
    result = _read_view_as_nobody()
    assert result["uid"] != 0 and result["capabilities"] == 0, result
    assert result["error"] is None and result["n"] == 1, result
    assert isinstance(result["fails"], int)


def test_a_netlink_failure_is_the_snapshots_error(monkeypatch: pytest.MonkeyPatch) -> None:
    class Refused:
        def __init__(self) -> None:
            raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(reader_module, "DiagSocket", Refused)
    snap = SocketReader().snapshot(2.0, ["127.0.0.1:9092"])
    assert snap.connections == () and snap.at == 2.0
    assert snap.error == "sock_diag netlink unavailable: Operation not permitted"


SNMP = (
    "Ip: Forwarding DefaultTTL\nIp: 1 64\n"
    "Tcp: RtoAlgorithm RtoMin RtoMax MaxConn ActiveOpens PassiveOpens AttemptFails EstabResets\n"
    "Tcp: 1 200 120000 -1 100 50 7 3\n"
)


def test_attempt_fails_is_read_from_proc_net_snmp() -> None:
    assert attempt_fails(SNMP) == 7
    assert attempt_fails(SNMP.replace(" 7 3", " x 3")) is None
    assert attempt_fails("Tcp: AttemptFails\n") is None
    assert isinstance(attempt_fails(Path("/proc/net/snmp").read_text()), int)


@given(st.text())
def test_attempt_fails_never_raises_on_any_text(text: str) -> None:
    assert attempt_fails(text) is None or isinstance(attempt_fails(text), int)


def test_ipv4_mapped_peers_are_named_as_ipv4() -> None:
    assert reader_module._unmapped("::ffff:10.0.0.1") == "10.0.0.1"
    assert reader_module._unmapped("::1") == "::1"
    assert str(reader_module.Endpoint("fe80::1", 9092)) == "[fe80::1]:9092"


def test_the_kernel_filter_keeps_exactly_the_broker_ports() -> None:
    listeners, clients = [], []
    try:
        for _ in range(5):
            srv = socket.socket()
            srv.bind(("127.0.0.1", 0))
            srv.listen()
            listeners.append(srv)
            clients.append(socket.create_connection(srv.getsockname()))
        peers = [_peer(s) for s in listeners]
        r = SocketReader(exclude_own=False)
        for chosen in ([0], [1, 3], [0, 1, 2, 3, 4], [4, 0]):
            wanted = [peers[i] for i in chosen]
            snap = r.snapshot(0.0, wanted)
            assert snap.error is None
            assert sorted(c.peer for c in snap.connections) == sorted(wanted)
            assert snap.sockets_seen == len(chosen)  # the kernel filtered, not Python
        too_many = [*peers, *(f"127.0.0.1:{p}" for p in range(1, reader_module.MAX_PORTS + 1))]
        snap = r.snapshot(0.0, too_many)
        assert snap.error is None and sorted(c.peer for c in snap.connections) == sorted(peers)
    finally:
        for s in clients + listeners:
            s.close()


def test_the_filter_bytecode_layout() -> None:
    one = reader_module.remote_port_filter([9092])
    assert len(one) == 16
    three = reader_module.remote_port_filter([9094, 9092, 9093, 9092])
    assert len(three) == 3 * 16 + 2 * 4  # three ports, two JMP ops between them


def test_a_connection_closed_by_this_side_is_listed_as_closed_the_sidecars_own_not(
    listener: socket.socket,
) -> None:
    peers = [_peer(listener)]
    reader = SocketReader()
    theirs = socket.create_connection(listener.getsockname())
    accepted, _ = listener.accept()
    theirs.sendall(b"w")
    accepted.recv(1)  # read: closing with unread data would reset, not close
    name = f"127.0.0.1:{theirs.getsockname()[1]}->{peers[0]}"
    theirs.close()  # this side closes first: TIME_WAIT here, for a minute
    time.sleep(0.05)
    accepted.close()
    mine = socket.create_connection(listener.getsockname())
    mine_accepted, _ = listener.accept()
    reader.closing_own(mine, 1.0)  # what the prober does before closing a probe socket
    own_name = f"127.0.0.1:{mine.getsockname()[1]}->{peers[0]}"
    mine.close()
    mine_accepted.close()
    time.sleep(0.2)
    snap = reader.snapshot(2.0, peers)
    closed = {c.name: c.closed_seconds for c in snap.closed}
    assert name in closed and own_name not in closed, closed
    assert 0.0 <= closed[name] < 5.0
    assert snap.connections == ()  # closed: no connection left to judge
    tree = SocketReader(Narrowing(process=ProcessRoot(pid=os.getpid())))
    assert tree.snapshot(3.0, peers).closed == ()  # ownerless: not the tree's to claim
