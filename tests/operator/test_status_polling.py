"""Polling real sidecar status servers over HTTP: answers, silence, garbage, staleness.

Covers `status_polling.poll_sidecars` against the sidecar's own HTTP server
(`hangwatch_sidecar.server.StatusServer` serving a real `SidecarState`): the verdict,
reasons, start and per-broker reachability arrive intact (the /status contract as
the sidecar writes it); a refused port, a socket that accepts and never answers
(timeout, while the other sidecars' answers are not held up), an HTTP error, a
non-JSON or wrong-schema body, an unknown verdict and a wedged sidecar (evaluation
too old) each become a report with an error and no verdict; a pod without an IP is
not dialled at all; each report is handed over as its read ends (`on_report`: an
answering sidecar's before a silent one's). The answer reader (`fetch_status`,
`parse_answer`): an answer larger than 1 MiB is cut off and refused, one that is not
HTTP, is chunked or is shorter than its Content-Length is refused; hypothesis:
`parse_answer` returns or raises `StatusAnswerError` for any bytes, and reads back any
status and body it is given.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hangwatch.contracts import Verdict
from hangwatch_operator.sidecar_status import PodReport
from hangwatch_operator.status_polling import (
    MAX_STATUS_BYTES,
    StatusAnswerError,
    parse_answer,
    poll_sidecars,
)
from hangwatch_operator.watched import WatchedPod
from hangwatch_testing.ports import free_port
from hangwatch_testing.remediation_cluster import BROKERS, FakeSidecar, TimedSidecar


def _pod(port: int | None, ip: str | None = "127.0.0.1", name: str = "e1") -> WatchedPod:
    return WatchedPod("jobs", name, f"uid-{name}", "writers", "executor", "node-a", ip, port)


def _poll(pods: list[WatchedPod], timeout: float = 1.0) -> list[PodReport]:
    async def run() -> list[PodReport]:
        return await poll_sidecars(
            pods, timeout_seconds=timeout, concurrency=8, stale_after_seconds=60
        )

    return asyncio.run(run())


class _Canned(BaseHTTPRequestHandler):
    replies: ClassVar[dict[str, tuple[int, bytes]]] = {}

    def log_message(self, format: str, *args: Any) -> None:
        return

    def do_GET(self) -> None:
        code, body = self.replies[str(self.server.server_address[1])]
        self.send_response(code)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def canned() -> Iterator[Any]:
    servers: list[ThreadingHTTPServer] = []

    def serve(code: int, body: bytes) -> int:
        server = ThreadingHTTPServer(("127.0.0.1", 0), _Canned)
        port = server.server_address[1]
        _Canned.replies[str(port)] = (code, body)
        threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
        servers.append(server)
        return int(port)

    yield serve
    for server in servers:
        server.shutdown()
        server.server_close()


def test_a_real_sidecar_status_arrives_intact() -> None:
    sidecar = FakeSidecar().start()
    try:
        sidecar.set(
            Verdict.PRODUCER_HUNG, reasons=("producer 7 has 120 pending, none delivered for 75 s",)
        )
        (report,) = _poll([_pod(sidecar.port)])
    finally:
        sidecar.close()
    assert report.error is None and report.status is not None
    status = report.status
    assert status.verdict is Verdict.PRODUCER_HUNG
    assert status.reasons == ("producer 7 has 120 pending, none delivered for 75 s",)
    assert status.since == pytest.approx(sidecar.since)
    assert [b.address for b in status.brokers] == list(BROKERS)
    assert status.reaches_cluster and not status.cut_off


def test_blackholed_brokers_arrive_as_timeouts() -> None:
    sidecar = FakeSidecar().start()
    try:
        sidecar.set(Verdict.CLUSTER_UNREACHABLE, reachable=False)
        (report,) = _poll([_pod(sidecar.port)])
    finally:
        sidecar.close()
    assert report.status is not None and report.status.cut_off
    assert report.status.failing_brokers == BROKERS
    assert {b.reachability for b in report.status.brokers} == {"timeout"}


def _hang_up_time(listener: socket.socket, closed: list[float]) -> None:
    """Accept one connection, never answer it, and note when the poller hung up."""
    conn, _ = listener.accept()
    with conn:
        conn.settimeout(30)
        while conn.recv(4096):
            pass
        closed.append(time.monotonic())


def test_a_silent_sidecar_times_out_without_holding_up_the_others() -> None:
    answering = TimedSidecar().start()
    closed: list[float] = []
    with socket.socket() as mute:  # accepts connections, never answers
        mute.bind(("127.0.0.1", 0))
        mute.listen(8)
        watcher = threading.Thread(target=_hang_up_time, args=(mute, closed), daemon=True)
        watcher.start()
        try:
            silent, fine = _poll(
                [_pod(mute.getsockname()[1]), _pod(answering.port, name="e2")], 0.4
            )
        finally:
            answering.close()
        watcher.join(30)
    assert silent.status is None and silent.error == "no answer within 0.4 s"
    assert fine.status is not None and fine.status.verdict is Verdict.HEALTHY
    # the silent sidecar is first in the list, yet the other one was asked while the
    # silent one's request was still open: the polls ran side by side
    assert closed and answering.answered, (closed, answering.answered)
    assert answering.answered[0] < closed[0]


def test_each_report_is_handed_over_as_its_read_ends() -> None:
    """`on_report` gets the answering sidecar's report while the silent one's read is
    still open (the order the reads ended in), and every report once."""
    answering = FakeSidecar().start()
    handed: list[tuple[str, bool]] = []
    with socket.socket() as mute:  # accepts connections, never answers
        mute.bind(("127.0.0.1", 0))
        mute.listen(8)
        pods = [_pod(mute.getsockname()[1]), _pod(answering.port, name="e2")]

        async def run() -> list[PodReport]:
            return await poll_sidecars(
                pods,
                timeout_seconds=0.4,
                concurrency=8,
                stale_after_seconds=60,
                on_report=lambda r: handed.append((r.pod.name, r.status is not None)),
            )

        try:
            reports = asyncio.run(run())
        finally:
            answering.close()
    assert handed == [("e2", True), ("e1", False)]
    assert [r.pod.name for r in reports] == ["e1", "e2"], "returned in the order given"


def test_a_refused_port_and_a_pod_without_ip() -> None:
    refused, no_ip = _poll([_pod(free_port()), _pod(9477, ip=None)])
    assert refused.status is None and refused.error is not None
    assert refused.error.startswith("cannot connect")
    assert no_ip.error == "pod has no IP or sidecar port yet"


@pytest.mark.parametrize(
    ("code", "body", "error"),
    [
        (503, b"busy", "HTTP 503 from /status"),
        (200, b"<html>", "unusable /status"),
        (
            200,
            json.dumps({"schema": 2, "verdict": "healthy"}).encode(),
            "unsupported /status schema 2",
        ),
        (
            200,
            json.dumps({"schema": 1, "verdict": "exploded"}).encode(),
            "unknown verdict 'exploded'",
        ),
        (
            200,
            json.dumps(
                {"schema": 1, "verdict": "healthy", "sidecar": {"evaluated_ts": 1000}}
            ).encode(),
            "last evaluation is",
        ),
        (200, json.dumps({"schema": 1, "verdict": "healthy", "brokers": [{}]}).encode(), "address"),
    ],
    ids=["http-error", "not-json", "wrong-schema", "unknown-verdict", "wedged", "bad-broker"],
)
def test_answers_the_operator_cannot_use_are_reported_not_read_as_verdicts(
    canned: Any, code: int, body: bytes, error: str
) -> None:
    (report,) = _poll([_pod(canned(code, body))])
    assert report.status is None and report.error is not None
    assert error in report.error


def _raw_server(answer: bytes) -> tuple[socket.socket, threading.Thread]:
    """A socket that answers one request with `answer` (then closes)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)

    def serve() -> None:
        conn, _ = listener.accept()
        with conn:
            conn.recv(4096)
            with contextlib.suppress(OSError):  # the poller hangs up on one too large
                conn.sendall(answer)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return listener, thread


@pytest.mark.parametrize(
    ("answer", "error"),
    [
        (
            b"HTTP/1.1 200 OK\r\n\r\n" + b" " * (MAX_STATUS_BYTES + 1),
            "unusable answer: /status larger than 1 MiB",
        ),
        (b"SSH-2.0-OpenSSH_9.6\r\n", "unusable answer: an answer that is not HTTP"),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
            "unusable answer: a chunked answer",
        ),
        (
            b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{}",
            "unusable answer: an answer shorter than its Content-Length",
        ),
    ],
    ids=["too-large", "not-http", "chunked", "cut-short"],
)
def test_answers_that_are_not_a_sidecars_are_refused(answer: bytes, error: str) -> None:
    listener, thread = _raw_server(answer)
    with listener:
        (report,) = _poll([_pod(listener.getsockname()[1])], 5.0)
        thread.join(10)
    assert report.status is None and report.error is not None
    assert report.error.startswith(error)


@settings(max_examples=300)
@given(st.binary(max_size=300))
def test_parse_answer_returns_or_refuses_any_bytes(raw: bytes) -> None:
    try:
        code, body = parse_answer(raw)
    except StatusAnswerError:
        return
    assert code >= 0 and len(body) <= len(raw)


@settings(max_examples=200)
@given(st.integers(100, 599), st.binary(max_size=2000), st.booleans())
def test_parse_answer_reads_back_any_status_and_body(code: int, body: bytes, length: bool) -> None:
    head = f"HTTP/1.1 {code} Whatever\r\nContent-Type: application/json\r\n"
    if length:
        head += f"Content-Length: {len(body)}\r\n"
    assert parse_answer((head + "\r\n").encode() + body) == (code, body)
