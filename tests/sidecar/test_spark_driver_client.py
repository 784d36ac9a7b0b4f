"""Reading the driver's REST API can fail in every way without wedging the sidecar.

Covers, with real sockets on loopback: a closed port (`refused`, naming
`spark.ui.enabled=false`), a listener that never accepts and one that accepts and never
answers (`timeout`: the deadline, not the driver, ended the read), a driver that
trickles a broken answer one byte at a time for 30 s (cut at the deadline, so `timeout`
and not the broken answer: the deadline is total, not per read), answers larger
than the bound announced or chunked (`too_large`, never read whole), HTML, NaN, deeply
nested JSON, and any body at all (hypothesis: decoded JSON without NaN/Infinity, or
`bad_answer`), 401/403 (`forbidden`, naming the UI's ACLs), a redirect
(not followed), an unknown host (`dns`) - none of them leaving a socket or a response
open; the reader maps Spark's own 404 texts (no such
app, executor does not exist) to their kinds, falls back to the executor list when the
driver has no thread dump, and asks the driver for the one application when no id is
set (answers replayed as a real Spark 4.3 driver sent them); `SparkWatch.poll` returns
while its first read is still outstanding, and the view says why it is unavailable.
"""

from __future__ import annotations

import gc
import json
import socket
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hangwatch.spark_driver import DriverUi
from hangwatch_sidecar.spark.client import DriverClient, DriverError, DriverReader
from hangwatch_sidecar.spark.tracking import SparkTracker
from hangwatch_sidecar.spark.watch import SparkWatch
from hangwatch_testing.ports import free_port

from .spark_builders import dump

TIMEOUT = 1.0
HANG_SECONDS = 30.0
"""How long the test drivers that never answer hold a request (far past TIMEOUT)."""


@contextmanager
def raw_server(handle: Callable[[socket.socket, str], None], accept: bool = True) -> Iterator[int]:
    """A loopback TCP server: each connection's request is read (up to its blank line),
    then `handle(conn, path)` answers it on a thread of its own. `accept=False`: a
    listener that never accepts (the kernel still completes handshakes into its backlog)."""
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    stop = threading.Event()
    conns: list[socket.socket] = []

    def serve() -> None:
        listener.settimeout(0.1)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                continue
            conns.append(conn)
            threading.Thread(target=_answer, args=(handle, conn), daemon=True).start()

    thread = threading.Thread(target=serve, daemon=True) if accept else None
    if thread:
        thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        stop.set()
        if thread:
            thread.join(5)
        for conn in conns:
            conn.close()
        listener.close()


def _answer(handle: Callable[[socket.socket, str], None], conn: socket.socket) -> None:
    try:
        conn.settimeout(5)
        with conn.makefile("rb") as reader:
            line = reader.readline().decode(errors="replace")
            while reader.readline() not in (b"\r\n", b"\n", b""):
                pass
        handle(conn, line.split(" ")[1] if line.count(" ") >= 2 else "")
    except OSError:
        return


@contextmanager
def http_server(routes: dict[str, tuple[int, str, bytes]]) -> Iterator[tuple[int, list[str]]]:
    """A loopback HTTP/1.1 server answering GET paths from `routes`; logs the paths."""
    seen: list[str] = []

    def one(conn: socket.socket, path: str) -> None:
        seen.append(path)
        status, kind, body = routes.get(path, (404, "text/plain", b"unknown path"))
        head = f"HTTP/1.1 {status} X\r\nContent-Type: {kind}\r\nContent-Length: {len(body)}\r\n"
        conn.sendall(head.encode() + b"Connection: close\r\n\r\n" + body)
        conn.close()

    with raw_server(one) as port:
        yield port, seen


def _client(port: int, max_bytes: int = 1 << 20) -> DriverClient:
    return DriverClient(DriverUi("http", "127.0.0.1", port), TIMEOUT, max_bytes)


def _fails(client: DriverClient, kind: str, path: str = "/api/v1/applications") -> DriverError:
    """The read fails with `kind`, in one line, leaking no socket."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        error = _failure(client, path)
        gc.collect()  # an unclosed socket or response warns when collected
    assert error.kind == kind, str(error)
    assert "\n" not in str(error)
    assert [str(w.message) for w in caught if w.category is ResourceWarning] == []
    return error


def _failure(client: DriverClient, path: str) -> DriverError:
    """The DriverError of a read, without the frames (and their sockets) it came from."""
    try:
        client.get_json(path)
    except DriverError as exc:
        exc.__context__ = None
        return exc.with_traceback(None)
    raise AssertionError(f"GET {path} did not fail")


def test_closed_port_is_refused_and_names_the_disabled_ui() -> None:
    error = _fails(_client(free_port()), "refused")
    assert "spark.ui.enabled=false" in str(error)


def test_listener_that_never_accepts_times_out() -> None:
    with raw_server(lambda conn, path: None, accept=False) as port:
        _fails(_client(port), "timeout")


def test_driver_that_never_answers_times_out() -> None:
    # after HANG_SECONDS the server closes without answering: a read that waited for the
    # driver instead of its deadline would fail as a closed connection, not `timeout`
    with raw_server(lambda conn, path: time.sleep(HANG_SECONDS)) as port:
        _fails(_client(port), "timeout")


def test_trickling_driver_is_cut_at_the_total_deadline() -> None:
    def trickle(conn: socket.socket, path: str) -> None:
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n")
        for _ in range(int(HANG_SECONDS / 0.2)):  # a header byte every 0.2 s: each read
            conn.sendall(b"X")  # alone is quick; a per-read deadline would see the end
            time.sleep(0.2)
        conn.sendall(b"\r\n\r\n")  # ... of a broken header: `bad_answer`, not `timeout`

    with raw_server(trickle) as port:
        _fails(_client(port), "timeout")


@pytest.mark.parametrize("chunked", [False, True])
def test_huge_answers_are_refused_unread(chunked: bool) -> None:
    sent: list[int] = []

    def huge(conn: socket.socket, path: str) -> None:
        if chunked:
            conn.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
            chunk = b"[" + b"1," * 50_000
            while len(sent) < 200:
                conn.sendall(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                sent.append(len(chunk))
        else:
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 900000000\r\n\r\n[1")

    with raw_server(huge) as port:
        _fails(_client(port, max_bytes=64 << 10), "too_large")
    assert len(sent) < 200  # stopped reading long before the end


@pytest.mark.parametrize(
    ("status", "body", "kind"),
    [
        (200, b"<html>Spark UI</html>", "bad_answer"),
        (200, b'{"duration": [NaN]}', "bad_answer"),
        (200, b"[" * 100_000 + b"]" * 100_000, "bad_answer"),
        (200, b"\xff\xfe garbage", "bad_answer"),
        (401, b"", "forbidden"),
        (403, b"user anonymous is not authorized", "forbidden"),
        (302, b"", "http_error"),
        (500, b"java.lang.NullPointerException\n\tat x", "http_error"),
        (404, b"no such app: nope", "not_found"),
    ],
)
def test_wrong_answers_become_one_line(status: int, body: bytes, kind: str) -> None:
    with http_server({"/api/v1/applications": (status, "application/json", body)}) as (port, _):
        error = _fails(_client(port), kind)
    if kind == "forbidden":
        assert "spark.acls.enable" in str(error)


@settings(max_examples=400)
@given(
    st.binary(max_size=300)
    | st.text(max_size=200).map(str.encode)
    | st.sampled_from([b"NaN", b"[Infinity]", b"-Infinity", b"1" * 5000, b'{"a": 1e999}'])
)
def test_any_answer_body_decodes_or_is_one_bad_answer(body: bytes) -> None:
    client = _client(1)
    try:
        value = client._decode(200, body, "/api/v1/x?y=1")
    except DriverError as exc:
        assert exc.kind == "bad_answer" and str(exc) == "answer to /api/v1/x is not JSON"
        return
    assert json.dumps(value, allow_nan=False)  # never NaN or an infinity


def test_unknown_host_is_a_dns_error() -> None:
    client = DriverClient(DriverUi("http", "driver.invalid", 4040), TIMEOUT)
    with pytest.raises(DriverError) as err:
        client.get_json("/api/v1/applications")
    assert err.value.kind in ("dns", "timeout")


APP = "app-20261123012639-0000"
THREADS = f"/api/v1/applications/{APP}/executors/0/threads"


def _json(doc: Any) -> tuple[int, str, bytes]:
    return (200, "application/json", json.dumps(doc).encode())


def test_reader_finds_the_application_and_reads_the_thread_dump() -> None:
    routes = {
        "/api/v1/applications": _json([{"id": APP, "name": "x", "attempts": []}]),
        THREADS: _json(dump("recorded_kafka_clients_0.11.0.3_states.json")),
    }
    with http_server(routes) as (port, seen):
        snap = DriverReader(_client(port), "", "0").read()
    assert snap.ok and snap.application_id == APP and snap.requests == 2
    assert [t.task_id for t in snap.tasks] == [0, 1, 2, 3] and len(snap.threads) == 6
    assert snap.response_bytes > 30_000 and seen == ["/api/v1/applications", THREADS]


@pytest.mark.parametrize(
    ("body", "kind"),
    [
        (b"no such app: " + APP.encode(), "application_unknown"),
        (b"Executor does not exist.", "executor_unknown"),
    ],
)
def test_reader_names_sparks_own_404s(body: bytes, kind: str) -> None:
    with http_server({THREADS: (404, "text/plain", body)}) as (port, _):
        snap = DriverReader(_client(port), APP, "0").read()
    assert not snap.ok and snap.error_kind == kind
    assert "executor 0" in (snap.error or "")


def test_reader_falls_back_to_executor_counts_without_a_thread_dump() -> None:
    routes = {
        THREADS: (404, "text/plain", b"No thread dump is available."),
        f"/api/v1/applications/{APP}/executors": _json(
            [{"id": "0", "activeTasks": 1, "failedTasks": 2, "completedTasks": 5}]
        ),
    }
    with http_server(routes) as (port, _):
        snap = DriverReader(_client(port), APP, "0").read()
    assert snap.ok and not snap.thread_dump and snap.counts is not None
    assert snap.counts.active_tasks == 1


def test_watch_never_waits_for_a_hanging_driver() -> None:
    with (
        raw_server(lambda conn, path: time.sleep(HANG_SECONDS)) as port,
        ThreadPoolExecutor(2) as pool,
    ):
        reader = DriverReader(_client(port), APP, "0")
        watch = SparkWatch(reader, SparkTracker(30.0, "0"), pool, 0.5, max_age_seconds=60.0)
        first = watch.poll()
        assert watch.stats.reads == 0  # returned with its read still outstanding
        assert not first.available and "first read" in (first.error or "")
        deadline = time.monotonic() + HANG_SECONDS / 2  # liveness: the read ends at TIMEOUT
        while time.monotonic() < deadline and watch.stats.reads == 0:
            assert not watch.poll().available
            time.sleep(0.05)
        view = watch.poll()
    assert watch.stats.reads >= 1 and dict(watch.stats.errors).get("timeout", 0) >= 1
    assert not view.available and "within 1 s" in (view.error or "")
