"""The sidecar's HTTP server: /metrics (Prometheus text), /status (JSON), /healthz.

Served on one port (`hangwatch.wire.sidecar_http`) by one thread running an asyncio
event loop: a connection costs a coroutine, never a thread, so the thread count does
not depend on clients. Each connection must deliver its request head within
`request_timeout_seconds` (and take its answer within the same time) or is closed; at
most `max_connections` are open at once, and a new one evicts the oldest, so clients
that open connections and never finish a request (half-open, slow-drip) cannot starve
the kubelet's /healthz or the operator's /status. Every answer closes its connection.

Handlers only read the latest published `SidecarState`, so they never wait for a probe.
/healthz answers 200 while the evaluation loop keeps completing rounds (503 once it has
been silent for three probe intervals plus the probe timeouts), so Kubernetes restarts a
wedged sidecar. /status is `hangwatch.wire.status.encode`: bounded in size.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from http import HTTPStatus

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from hangwatch.wire import sidecar_http, status
from hangwatch_sidecar.metrics import registry_for
from hangwatch_sidecar.state import SidecarState, status_document

log = logging.getLogger(__name__)

MAX_HEAD_BYTES = 8192
"""A request line and headers longer than this are refused (431)."""
DRAIN_SECONDS = 10.0
"""At close, how long open connections are given to end after being aborted. They end
within a pass or two of the loop; the bound is for a loop thread starved of the GIL (a
test closing 240 servers at once, each on its own thread, took over 1 s for two passes,
and a connection task cancelled before its first step leaks its socket)."""

NOT_FOUND = (
    f"not found: try {', '.join(sidecar_http.PATHS[:-1])} or {sidecar_http.PATHS[-1]}\n"
).encode()


class StatusServer:
    """Serves the three endpoints for the state returned by `get_state`."""

    def __init__(
        self,
        get_state: Callable[[], SidecarState],
        port: int,
        stale_after_seconds: float,
        host: str = "0.0.0.0",
        *,
        request_timeout_seconds: float = 5.0,
        max_connections: int = 256,
        backlog: int = 128,
    ) -> None:
        self.get_state = get_state
        self.stale_after_seconds = stale_after_seconds
        self.request_timeout_seconds = request_timeout_seconds
        self.max_connections = max_connections
        self.registry = registry_for(get_state)
        self.socket = socket.create_server((host, port), backlog=backlog)
        self.port = int(self.socket.getsockname()[1])
        self._open: OrderedDict[asyncio.StreamWriter, None] = OrderedDict()
        self._loop = asyncio.new_event_loop()
        self._stop: asyncio.Event | None = None
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True, name="hangwatch-http")

    @property
    def open_connections(self) -> int:
        """Connections accepted and not yet closed."""
        return len(self._open)

    def healthy(self) -> tuple[bool, str]:
        state = self.get_state()
        reference = state.evaluated_ts or state.started_ts
        age = time.time() - reference
        if age > self.stale_after_seconds:
            return False, f"no evaluation round for {age:.0f} s"
        return True, "ok"

    def answer(self, method: str, target: str) -> tuple[int, bytes, str]:
        """(status code, body, content type) for one request."""
        if method not in ("GET", "HEAD"):
            return 405, b"only GET\n", "text/plain"
        path = target.split("?", 1)[0]
        if path == sidecar_http.METRICS_PATH:
            return 200, generate_latest(self.registry), CONTENT_TYPE_LATEST
        if path == sidecar_http.STATUS_PATH:
            body = status.encode(status_document(self.get_state()))
            return 200, body, "application/json"
        if path == sidecar_http.HEALTHZ_PATH:
            ok, why = self.healthy()
            return 200 if ok else 503, (why + "\n").encode(), "text/plain"
        return 404, NOT_FOUND, "text/plain"

    # -- the event loop thread ------------------------------------------------------------------
    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_until_complete(self._main())
        finally:
            self._loop.close()

    async def _main(self) -> None:
        self._stop = asyncio.Event()
        server = await asyncio.start_server(
            self._connection, sock=self.socket, limit=MAX_HEAD_BYTES
        )
        self._ready.set()
        async with server:
            await self._stop.wait()
        await self._drop_connections()

    async def _drop_connections(self) -> None:
        """End every connection before the loop does. A connection accepted just before
        the close is a task of asyncio's that may not have run yet: cancelled before its
        first step it would never close the accepted socket (a ResourceWarning once
        collected, in whatever test runs then). So each open connection is aborted and
        its task left to end by itself (a task not started yet starts, registers and is
        aborted on the next pass); what is left after `DRAIN_SECONDS` is cancelled."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + DRAIN_SECONDS
        while True:
            handlers = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            if not handlers:
                return
            for writer in list(self._open):
                writer.transport.abort()
            if loop.time() > deadline:
                break
            await asyncio.sleep(0.005)
        for task in handlers:
            task.cancel()
        await asyncio.gather(*handlers, return_exceptions=True)
        await asyncio.sleep(0)  # the aborted transports' connection_lost callbacks run

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._open[writer] = None
        if len(self._open) > self.max_connections:
            oldest = next(iter(self._open))
            oldest.transport.abort()  # its reader fails and its own task cleans up
        try:
            await asyncio.wait_for(self._exchange(reader, writer), self.request_timeout_seconds)
        except (TimeoutError, ConnectionError, asyncio.IncompleteReadError):
            pass  # a client that does not finish its request in time is dropped
        except asyncio.CancelledError:
            pass  # the server is closing
        except Exception:
            log.exception("HTTP request failed")
        finally:
            self._open.pop(writer, None)
            writer.transport.abort()

    async def _exchange(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.LimitOverrunError:
            code, body, kind, method = 431, b"request head too large\n", "text/plain", "GET"
        else:
            parts = head.split(b"\r\n", 1)[0].decode("latin-1").split(" ")
            if len(parts) != 3 or not parts[2].startswith("HTTP/"):
                code, body, kind, method = 400, b"bad request\n", "text/plain", "GET"
            else:
                method = parts[0]
                code, body, kind = self.answer(method, parts[1])
        writer.write(
            (
                f"HTTP/1.1 {code} {HTTPStatus(code).phrase}\r\n"
                f"Content-Type: {kind}\r\nContent-Length: {len(body)}\r\n"
                "Connection: close\r\n\r\n"
            ).encode()
            + (b"" if method == "HEAD" else body)
        )
        await writer.drain()

    # -- control from other threads ------------------------------------------------------------
    def start(self) -> None:
        """Serve from a daemon thread; returns once the port accepts requests."""
        self._thread.start()
        self._ready.wait(10.0)

    def close(self, wait_seconds: float = 5.0) -> None:
        """Stop serving, drop open connections and release the port; waits at most
        `wait_seconds` for the serving thread (a daemon) to end."""
        if self._thread.is_alive() and self._stop is not None:
            with contextlib.suppress(RuntimeError):  # the loop already ended
                self._loop.call_soon_threadsafe(self._stop.set)
            self._thread.join(wait_seconds)
        elif not self._thread.is_alive() and not self._loop.is_closed():
            self._loop.close()  # never started
        self.socket.close()
