"""Ports for the listeners tests start: the one `free_port` of tests and benchmarks."""

from __future__ import annotations

import socket
from pathlib import Path


def free_port(host: str = "0.0.0.0") -> int:
    """A port nothing listens on now (bound on all addresses by default, so no loopback
    listener uses it either). The kernel may hand it out again once it is released: a
    listener bound much later wants `hangwatch_testing.kube.cluster.lasting_port`."""
    with socket.socket() as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


def listeners(port: int) -> list[str]:
    """The local addresses listening on TCP `port` now (IPv4 and IPv6), from /proc: what an
    "address already in use" names, so its message says who holds the port."""
    found = []
    for table, family in (("/proc/net/tcp", socket.AF_INET), ("/proc/net/tcp6", socket.AF_INET6)):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            address, hex_port = fields[1].split(":")
            if fields[3] != "0A" or int(hex_port, 16) != port:  # 0A: LISTEN
                continue
            raw = bytes.fromhex(address)
            # the kernel prints each 32-bit word of the address in host (little-endian) order
            words = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
            host = socket.inet_ntop(family, words)
            found.append(f"{host}:{port}" if family == socket.AF_INET else f"[{host}]:{port}")
    return found
