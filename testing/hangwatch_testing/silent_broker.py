"""A broker that accepts TCP and never answers, for tests (an unanswering broker).

Kafka clients and hangwatch's probe connect to it and then wait on their request until
their own timeout: the state of a frozen broker process or a half-dead host. It
records the peer address of every connection it accepted and holds them open until
released or closed (a `with` block closes it); tests/operator uses it as a sidecar that
holds a round's poll.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from types import TracebackType


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

    def __enter__(self) -> SilentBroker:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    @property
    def port(self) -> int:
        return int(self.server.getsockname()[1])

    def open_connections(self) -> int:
        """Held connections whose peer has not closed (what it sent is read and dropped)."""
        count = 0
        for conn in list(self._held):
            conn.setblocking(False)
            try:
                while conn.recv(65536):
                    pass
            except BlockingIOError:
                count += 1  # nothing more to read, not closed
            except OSError:
                pass
        return count

    def release(self) -> None:
        """Close every connection held so far (its peer reads the end); keep listening."""
        held, self._held = self._held, []
        for conn in held:
            conn.close()

    def close(self) -> None:
        with contextlib.suppress(OSError):  # already shut
            self.server.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept()
        self.server.close()
        self._thread.join(timeout=10)
        for conn in self._held:
            conn.close()
