"""HTTP reads of the Spark driver's REST API, bounded in time and size (the I/O edge).

The driver's UI serves `/api/v1` (Spark's monitoring REST API). `DriverClient.get_json`
does one GET with the standard library's `http.client`: no proxy from the environment,
no redirects followed, no compression, a connect timeout and a *total* deadline (a
timer shuts the socket down when it passes, so a driver that trickles bytes cannot
hold a read open), answers larger than `max_bytes` refused before they are read, JSON
without NaN or infinities (not even as `1e999`). Every failure becomes a `DriverError`
with a bounded `kind` and one line of text. Why `http.client` and not a library: the
sidecar makes a few GETs per interval to one host; the standard library does that with
full control of the socket, and the sidecar's dependencies stay at confluent-kafka and
prometheus-client.

`DriverReader` knows which paths to read for one executor (see docs/sidecar.md, "The
Spark view") and returns a `SparkSnapshot`, never raising.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import math
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any
from urllib.parse import quote

from hangwatch.spark_driver import DriverUi
from hangwatch.wire.status import FailureBudget
from hangwatch_sidecar.spark import answers, failures
from hangwatch_sidecar.spark.threads import ThreadDumpError, classify_dump
from hangwatch_sidecar.spark.types import (
    ExecutorCounts,
    FailedAttempt,
    SparkSnapshot,
    StagePeers,
    TaskThread,
)

MAX_RESPONSE_BYTES = 2 << 20
"""Largest answer read (2 MiB): an executor's thread dump is 30-150 KiB; a JVM with a
few thousand threads fits; more is refused rather than parsed."""
MAX_STAGES = 4
"""Stage attempts whose peers (or failed attempts) are read in one round at most (tasks
of an executor usually belong to one stage)."""
MAX_FAILED_ATTEMPTS = 20
"""Failed task attempts read per stage, and kept, at most."""
API = "/api/v1/applications"

ERROR_KINDS = (
    "refused",
    "timeout",
    "dns",
    "network",
    "forbidden",
    "http_error",
    "application_unknown",
    "executor_unknown",
    "bad_answer",
    "too_large",
)
"""Bounded `reason` label values of hangwatch_spark_read_errors_total."""


class DriverError(Exception):
    """A read of the driver that failed; `kind` is one of ERROR_KINDS (or `not_found`)."""

    def __init__(self, kind: str, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.kind, self.status = kind, status


def _printable(raw: bytes, limit: int = 120) -> str:
    text = raw[:limit].decode("utf-8", "replace").split("\n", 1)[0]
    return "".join(c if c.isprintable() else "?" for c in text).strip()


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):  # 1e999 parses as infinity
        raise ValueError(f"{text[:20]} is out of range")
    return value


class DriverClient:
    """GETs of one driver UI, each within `timeout_seconds` in all."""

    def __init__(
        self, ui: DriverUi, timeout_seconds: float, max_bytes: int = MAX_RESPONSE_BYTES
    ) -> None:
        self.ui, self.timeout_seconds, self.max_bytes = ui, timeout_seconds, max_bytes
        self.requests = 0
        self.response_bytes = 0

    def _connection(self) -> http.client.HTTPConnection:
        if self.ui.scheme == "https":
            return http.client.HTTPSConnection(
                self.ui.host, self.ui.port, timeout=self.timeout_seconds,
                context=ssl.create_default_context(),
            )  # fmt: skip
        return http.client.HTTPConnection(self.ui.host, self.ui.port, timeout=self.timeout_seconds)

    def get_json(self, path: str) -> Any:
        """The decoded JSON answer to GET `path`; DriverError on any failure."""
        self.requests += 1
        conn = self._connection()
        expired = threading.Event()

        def expire() -> None:
            expired.set()
            sock = conn.sock
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)

        timer = threading.Timer(self.timeout_seconds, expire)
        timer.daemon = True
        timer.start()
        try:
            status, body = self._exchange(conn, path)
        except TimeoutError:
            raise DriverError("timeout", self._timeout_text()) from None
        except (OSError, http.client.HTTPException) as exc:
            if expired.is_set():
                raise DriverError("timeout", self._timeout_text()) from None
            raise _network_error(exc, self.ui.url) from None
        finally:
            timer.cancel()
            conn.close()
        if expired.is_set():  # cut short by the deadline: whatever arrived is incomplete
            raise DriverError("timeout", self._timeout_text())
        return self._decode(status, body, path)

    def _timeout_text(self) -> str:
        return f"no complete answer from {self.ui.url} within {self.timeout_seconds:g} s"

    def _exchange(self, conn: http.client.HTTPConnection, path: str) -> tuple[int, bytes]:
        headers = {"Accept": "application/json", "Accept-Encoding": "identity"}
        conn.request("GET", path, headers={**headers, "User-Agent": "hangwatch-sidecar"})
        # The response holds its own reference to the socket: it is closed on every path
        # (an answer refused or cut short is never read to its end).
        with conn.getresponse() as response:
            length = response.getheader("Content-Length")
            if length and length.strip().isdigit() and int(length) > self.max_bytes:
                raise DriverError("too_large", f"answer of {int(length)} bytes refused", 0)
            body = response.read(self.max_bytes + 1)
            self.response_bytes += len(body)
            if len(body) > self.max_bytes:
                raise DriverError("too_large", f"answer larger than {self.max_bytes} bytes refused")
            return response.status, body

    def _decode(self, status: int, body: bytes, path: str) -> Any:
        if status in (401, 403):
            raise DriverError(
                "forbidden",
                f"HTTP {status} from the driver UI: it refuses unauthenticated reads "
                "(spark.acls.enable, spark.ui.filters)",
                status,
            )
        if status == 404:
            raise DriverError("not_found", _printable(body) or "not found", status)
        if status != 200:
            raise DriverError("http_error", f"HTTP {status}: {_printable(body)}", status)
        try:
            return json.loads(
                body.decode("utf-8"), parse_constant=_no_constants, parse_float=_finite
            )
        except (ValueError, RecursionError):
            raise DriverError(
                "bad_answer", f"answer to {path.partition('?')[0]} is not JSON"
            ) from None


def _network_error(exc: BaseException, url: str) -> DriverError:
    if isinstance(exc, DriverError):
        return exc
    if isinstance(exc, ConnectionRefusedError):
        return DriverError(
            "refused",
            f"connection to {url} refused (UI disabled with spark.ui.enabled=false, another "
            "spark.ui.port, or the driver is gone)",
        )
    if isinstance(exc, socket.gaierror):
        return DriverError("dns", f"cannot resolve the driver's host of {url}: {exc.strerror}")
    if isinstance(exc, http.client.HTTPException):
        return DriverError("bad_answer", f"malformed HTTP answer from {url}")
    reason = getattr(exc, "strerror", None) or type(exc).__name__
    return DriverError("network", f"cannot read {url}: {reason}")


class DriverReader:
    """The reads of one executor's Spark view: thread dump (or executor list), stage peers."""

    def __init__(
        self,
        client: DriverClient,
        application_id: str,
        executor_id: str,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client, self.executor_id, self.clock = client, executor_id, clock
        self.application_id = application_id
        self._budget_settings: failures.BudgetSettings | None = None
        self.counts: ExecutorCounts | None = None
        """This executor's task counts at the last `read_budget` (None: unknown)."""
        self.classpath: tuple[str, ...] = ()
        """The application's classpath entries (`/environment`, read with the budget's
        settings): which kafka-clients jar its executors run."""

    def _app_path(self) -> str:
        if not self.application_id:
            ids = answers.application_ids(self.client.get_json(API))
            if len(ids) != 1:
                raise DriverError(
                    "application_unknown",
                    f"the driver serves {len(ids)} applications; set --application-id",
                )
            self.application_id = ids[0]
        return f"{API}/{quote(self.application_id, safe='')}"

    def read(self) -> SparkSnapshot:
        """This executor's running tasks and producer threads (no stage peers), as of now."""
        at = self.clock()
        before = (self.client.requests, self.client.response_bytes)
        try:
            snapshot = self._read(at)
        except DriverError as exc:
            snapshot = SparkSnapshot(at=at, error=str(exc), error_kind=_kind(exc))
        except (answers.AnswerError, ThreadDumpError) as exc:
            snapshot = SparkSnapshot(at=at, error=f"driver answer refused: {exc}",
                                     error_kind="bad_answer")  # fmt: skip
        return _costed(snapshot, self, at, before)

    def _read(self, at: float) -> SparkSnapshot:
        if not self.executor_id:
            raise DriverError("executor_unknown", "the executor id is not set (--executor-id)")
        base = self._app_path()
        executor = quote(self.executor_id, safe="")
        try:
            dump = classify_dump(self.client.get_json(f"{base}/executors/{executor}/threads"))
        except DriverError as exc:
            if exc.kind != "not_found" or "thread dump" not in str(exc).lower():
                raise
            # The driver could not get a dump from the executor this time: its counts still say
            # whether a task runs.
            counts = answers.executor_counts(
                self.client.get_json(f"{base}/executors"), self.executor_id
            )
            return SparkSnapshot(at=at, counts=counts, thread_dump=False)
        return SparkSnapshot(at=at, tasks=dump.tasks, threads=dump.threads)

    def read_budget(self, now: float) -> FailureBudget:
        """The application's executor failure budget as of `now` (epoch seconds): its
        settings read once (version, environment), its dead executors (and this
        executor's task counts, `counts`) every time. Raises DriverError or AnswerError."""
        base = self._app_path()
        if self._budget_settings is None:
            version = failures.spark_version(self.client.get_json("/api/v1/version"))
            environment = self.client.get_json(f"{base}/environment")
            self._budget_settings = failures.budget_settings(version, environment)
            self.classpath = failures.classpath_entries(environment)
        settings = self._budget_settings
        executors = self.client.get_json(f"{base}/allexecutors")
        self.counts = answers.listed_counts(executors, self.executor_id)
        if settings.max_failures is None:
            return failures.failure_budget(settings, 0)
        failed = failures.failed_executors(executors, now, settings.validity_seconds)
        return failures.failure_budget(settings, failed)

    def read_failed_attempts(
        self, statuses: tuple[str, ...] = ("active", "failed")
    ) -> tuple[FailedAttempt, ...]:
        """This executor's failed task attempts in the stages of `statuses` (Spark's stage
        states; by default the active and failed ones: what fails now) - at most
        MAX_STAGES of them, newest first. Raises DriverError or AnswerError."""
        base = self._app_path()
        wanted = "".join(f"status={status}&" for status in statuses)
        stages = answers.stages_with_failures(
            self.client.get_json(f"{base}/stages?{wanted}details=false")
        )
        found: list[FailedAttempt] = []
        for stage_id, attempt in stages[:MAX_STAGES]:
            path = f"{base}/stages/{stage_id}/{attempt}/taskList"
            try:
                tasks = self.client.get_json(f"{path}?status=FAILED&length={MAX_FAILED_ATTEMPTS}")
            except DriverError as exc:
                if exc.kind == "not_found":
                    continue
                raise
            found += answers.failed_attempts(tasks, self.executor_id, (stage_id, attempt))
        return tuple(sorted(found, key=lambda a: -a.task_id)[:MAX_FAILED_ATTEMPTS])

    def read_peers(self, tasks: Iterable[TaskThread]) -> dict[tuple[int, int], StagePeers]:
        """Counts and the finished tasks' median duration of the stages of `tasks` (at most
        MAX_STAGES); stages the driver no longer knows are left out."""
        found: dict[tuple[int, int], StagePeers] = {}
        wanted = sorted({t.stage for t in tasks if t.stage is not None})[:MAX_STAGES]
        for stage_id, attempt in wanted:
            path = f"{self._app_path()}/stages/{stage_id}/{attempt}"
            try:
                counts = answers.stage_peers(self.client.get_json(f"{path}?details=false"))
            except DriverError as exc:
                if exc.kind == "not_found":
                    continue
                raise
            try:
                summary = self.client.get_json(f"{path}/taskSummary?quantiles=0.5")
                median: float | None = answers.median_duration_seconds(summary)
            except DriverError as exc:
                if exc.kind != "not_found":  # 404 before any task of the stage finished
                    raise
                median = None
            found[(stage_id, attempt)] = replace(counts, median_seconds=median)
        return found


def _kind(exc: DriverError) -> str:
    text = str(exc).lower()
    if exc.kind in ("not_found", "http_error"):
        if "no such app" in text or "unknown app" in text:
            return "application_unknown"
        if "executor" in text and ("not exist" in text or "not active" in text):
            return "executor_unknown"
    return "http_error" if exc.kind == "not_found" else exc.kind


def _costed(
    snapshot: SparkSnapshot, reader: DriverReader, at: float, before: tuple[int, int]
) -> SparkSnapshot:
    message = snapshot.error
    if snapshot.error_kind in ("application_unknown", "executor_unknown") and message:
        message = f"{message} (application {reader.application_id or '?'}, executor " + (
            f"{reader.executor_id})" if reader.executor_id else "?)"
        )
    return replace(
        snapshot,
        error=message,
        read_seconds=reader.clock() - at,
        requests=reader.client.requests - before[0],
        response_bytes=reader.client.response_bytes - before[1],
        application_id=reader.application_id,
    )
