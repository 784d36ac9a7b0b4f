"""A port the lab calls dead is handed to no other process until the lab closes.

Covers `netfilter.Blackholes.hold` (what `shrink` does for every broker it stops): the
port stays bound, never listening, so a connection to it is refused and the conflict
rule a `bind(0)` follows (a socket without SO_REUSEADDR) refuses it, which is what keeps
`free_port` from giving it to an API server of a concurrent test, whose own traffic the
lab's DROP rule on that port number would then drop (seen: kube-apiserver could not
reach itself during a lab's shrink). `close` releases it; a port in use is left alone.
"""

from __future__ import annotations

import errno
import socket

import pytest

from hangwatch_lab import netfilter
from hangwatch_testing.ports import free_port


def _bind(port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.bind(("0.0.0.0", port))
    except OSError:
        sock.close()
        raise
    return sock


def test_a_held_port_is_refused_and_bound_by_no_one_until_close() -> None:
    port = free_port()
    holes = netfilter.Blackholes()
    holes.hold(port)
    try:
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port), timeout=5).close()
        with pytest.raises(OSError) as taken:
            _bind(port).close()
        assert taken.value.errno == errno.EADDRINUSE
    finally:
        holes.close()
    _bind(port).close()  # released
    assert holes.held == {}


def test_a_port_in_use_is_left_to_its_owner() -> None:
    with socket.socket() as listener:
        listener.bind(("0.0.0.0", 0))
        listener.listen()
        port = listener.getsockname()[1]
        holes = netfilter.Blackholes()
        holes.hold(port)
        assert port not in holes.held
        socket.create_connection(("127.0.0.1", port), timeout=5).close()  # still its owner's
        holes.close()
