"""A broker that accepts TCP and never answers, for tests (an unanswering broker).

Kafka clients and hangwatch's probe connect to it and then wait on their request until
their own timeout: the state of a frozen broker process or a half-dead host. It
records the peer address of every connection it accepted and holds them open until
closed.
"""

from __future__ import annotations

import contextlib
import socket
import threading


class SilentBroker:
    """A TCP listener on `host` that accepts and never writes a byte."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        self.server = socket.create_server((host, 0))
        self.address = f"{host}:{self.server.getsockname()[1]}"
        self.peers: list[str] = []
        self._held: list[socket.socket] = []
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while True:
            try:
                conn, peer = self.server.accept()
            except OSError:
                return
            self._held.append(conn)
            self.peers.append(f"{peer[0]}:{peer[1]}")

    def close(self) -> None:
        with contextlib.suppress(OSError):  # already shut
            self.server.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept()
        self.server.close()
        self._thread.join(timeout=10)
        for conn in self._held:
            conn.close()
