"""Ports for the listeners tests start: the one `free_port` of tests and benchmarks."""

from __future__ import annotations

import socket


def free_port(host: str = "0.0.0.0") -> int:
    """A port nothing listens on now (bound on all addresses by default, so no loopback
    listener uses it either). The kernel may hand it out again once it is released: a
    listener bound much later wants `tests.kube.cluster.lasting_port`."""
    with socket.socket() as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port
