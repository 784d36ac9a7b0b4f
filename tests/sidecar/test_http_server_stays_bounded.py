"""The sidecar's HTTP server stays bounded under clients that never finish a request.

Covers: 400 half-open connections (a request head started and never ended) do not add
a single thread to the server, /healthz, /status and /metrics still answer meanwhile
(before the server has dropped even the newest half-open connection), and the server
closes every half-open connection by itself within its request timeout (connections
reclaimed); a request head that is too long, a malformed request line and a method
other than GET answer an error status; /status answers the bounded document of
`hangwatch.wire.status`.
"""

from __future__ import annotations

import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest

from hangwatch.contracts import Verdict
from hangwatch.wire import status
from hangwatch_sidecar.server import StatusServer
from hangwatch_sidecar.state import SidecarState
from hangwatch_testing.waiting import wait_for

HALF_OPEN = 400


@pytest.fixture
def server() -> Iterator[StatusServer]:
    state = SidecarState(started_ts=time.time(), verdict=Verdict.HEALTHY, evaluated_ts=time.time())
    running = StatusServer(lambda: state, 0, 60.0, host="127.0.0.1")
    running.start()
    yield running
    running.close()


def get(port: int, path: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=2) as reply:
            return reply.status, reply.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def raw_request(port: int, data: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(data)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
        return b"".join(chunks)


def _still_open(client: socket.socket) -> bool:
    """The server has not closed this connection (nothing to read, no end of stream)."""
    client.settimeout(0.0)
    try:
        return client.recv(1) != b""
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        client.settimeout(5)


def test_half_open_connections_add_no_thread_and_healthz_answers(server: StatusServer) -> None:
    threads_before = threading.active_count()
    clients = []
    try:
        for _ in range(HALF_OPEN):
            client = socket.create_connection(("127.0.0.1", server.port), timeout=5)
            client.sendall(b"GET /status HTTP/1.1\r\nHost: sidecar\r\n")  # never ends
            clients.append(client)
        assert get(server.port, "/healthz") == (200, b"ok\n")
        code, body = get(server.port, "/status")
        assert code == 200 and status.decode(body).verdict == "healthy"
        assert get(server.port, "/metrics")[0] == 200
        threads_during = threading.active_count()
        assert threads_during <= threads_before, (threads_before, threads_during)
        assert _still_open(clients[-1]), "the answers waited for half-open connections to go"

        def all_closed_by_the_server() -> bool:
            for client in clients:
                client.settimeout(0.01)
                try:
                    if client.recv(1) != b"":
                        return False
                except TimeoutError:
                    return False
                except OSError:
                    pass  # reset: closed too
            return True

        wait_for(all_closed_by_the_server, 15, "the server to drop every half-open connection")
        assert threading.active_count() <= threads_before
    finally:
        for client in clients:
            client.close()


@pytest.mark.parametrize(
    ("request_bytes", "code"),
    [
        (b"GET /" + b"x" * 20_000 + b" HTTP/1.1\r\n\r\n", 431),
        (b"garbage\r\n\r\n", 400),
        (b"POST /status HTTP/1.1\r\nContent-Length: 0\r\n\r\n", 405),
        (b"GET /nothing HTTP/1.1\r\n\r\n", 404),
        (b"HEAD /healthz HTTP/1.1\r\n\r\n", 200),
    ],
    ids=["head-too-long", "malformed", "post", "unknown-path", "head"],
)
def test_bad_requests_get_an_error_status(
    server: StatusServer, request_bytes: bytes, code: int
) -> None:
    answer = raw_request(server.port, request_bytes)
    assert answer.split(b"\r\n", 1)[0].split(b" ")[1] == str(code).encode()
