"""The delivery ledger of one producer: what was enqueued, acknowledged, failed, in flight.

`HangwatchProducer` proves at-least-once per Spark task with these numbers: `send()`
records each accepted message (`enqueue`, or `withdraw` when librdkafka refused it),
and librdkafka's delivery reports, served on the wrapper's poll thread, are recorded
here directly (`record_report` is the client's own `on_delivery`), as are client
errors (`record_client_error`). A producer closes cleanly only when nothing is
outstanding and nothing failed (`failure_reason`); `DeliveryFailed` carries the
`counters` and the first `errors`. The telemetry document reports the same numbers
(`hangwatch_producer.snapshot`), and the errors recorded here are logged off the poll
thread, each code at most once per interval (`ErrorLogThrottle`).

Threads: `enqueue` and `withdraw` may run on several threads at once (the job's and
the callback thread, where a job callback may `send()`), so they hold the lock the
owner passes in; every other record comes from the poll thread alone, and readers on
other threads see consistent-enough copies (counts only grow). Recording never waits
on anything but that lock, held for an increment: nothing here blocks the poll thread.

Pure: no I/O, no client library, the wall clock passed in; librdkafka's error
and message objects are read through the `ReportedError` and `ReportedMessage`
protocols.
"""

from __future__ import annotations

import builtins
import collections
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

MAX_ERROR_EVENTS = 1000
"""Errors waiting to be logged; beyond this the oldest are dropped (they are still counted)."""
MAX_ERRORS_SEEN = 1000
"""(topic, code) pairs remembered; beyond this the least recently met is forgotten."""


class ReportedError(Protocol):
    """What the ledger reads of a `confluent_kafka.KafkaError`."""

    def name(self) -> builtins.str: ...
    def str(self) -> builtins.str: ...
    def fatal(self) -> bool: ...


class ReportedMessage(Protocol):
    """What the ledger reads of a `confluent_kafka.Message` whose delivery failed."""

    def topic(self) -> str | None: ...
    def partition(self) -> int | None: ...


@dataclass(frozen=True)
class Counters:
    """Message counts of one producer (see docs/telemetry.md, `counters`)."""

    enqueued: int
    """Messages accepted by `send()`."""
    delivered: int
    """Messages acknowledged by the cluster."""
    failed: int
    """Messages whose delivery report was an error (timed out, rejected, purged)."""
    in_queue: int
    """librdkafka's `len(producer)`: queued, in flight, or reports not yet served."""
    queue_full_waits: int
    """`send()` calls that found the local queue full and had to wait."""

    @property
    def unacknowledged(self) -> int:
        """Messages with no delivery report yet."""
        return self.enqueued - self.delivered - self.failed


@dataclass(frozen=True)
class ErrorSeen:
    """One error code met on one topic ("" for a client error): count, first and last time."""

    code: str
    topic: str
    count: int
    first_ts: float
    last_ts: float


@dataclass(frozen=True)
class ThrottleSeen:
    """The brokers' quota throttling as the producer met it (librdkafka's `throttle_cb`):
    how often, the latest throttle time a broker reported and when; `last_seconds` 0 once
    that broker stopped throttling."""

    count: int
    last_ts: float
    last_seconds: float
    broker: str


class ErrorEvent(NamedTuple):
    """One error to log: a failed delivery, or a client error (`client` True)."""

    code: str
    reason: str
    client: bool


class DeliveryLedger:
    """Per-producer delivery accounting: counts, first errors, last error, topics."""

    def __init__(
        self,
        *,
        lock: AbstractContextManager[Any],
        clock: Callable[[], float],
        scrub: Callable[[str], str],
        max_recorded_errors: int,
    ) -> None:
        self.enqueued = self.delivered = self.failed = self.queue_full_waits = 0
        self._lock = lock
        self._clock = clock
        self._scrub = scrub
        self._max_recorded = max_recorded_errors
        self.errors: list[str] = []
        """The first `max_recorded_errors` delivery errors, `topic[partition]: code: reason`."""
        self.error_counts: dict[str, int] = {}
        """Error code -> occurrences, delivery and client errors."""
        self.last_error: dict[str, Any] | None = None
        """The latest error: code, reason, ts, fatal (the telemetry's `last_error`)."""
        self.errors_seen: dict[tuple[str, str], ErrorSeen] = {}
        """(topic, code) -> how often and when first and last (the telemetry's `errors`;
        topic "" for client errors); at most `MAX_ERRORS_SEEN`, the oldest dropped."""
        self.last_delivery_ts: float | None = None
        self.throttle: ThrottleSeen | None = None
        """The latest throttling a broker reported (the telemetry's `throttle`)."""
        self.topics: set[str] = set()
        self._events: collections.deque[ErrorEvent] = collections.deque(maxlen=MAX_ERROR_EVENTS)

    # -- send(): any thread ----------------------------------------------------------------
    def enqueue(self) -> None:
        """A message is being handed to librdkafka (counted before, so that a report
        served at once never finds it uncounted)."""
        with self._lock:
            self.enqueued += 1

    def withdraw(self) -> None:
        """librdkafka did not take the message `enqueue` counted: it will have no report."""
        with self._lock:
            self.enqueued -= 1

    def taken(self, topic: str) -> None:
        """librdkafka took the message `enqueue` counted: `topic` is one written to."""
        self.topics.add(topic)

    def queue_full_wait(self) -> None:
        """A `send()` found the local queue full and waits for room."""
        with self._lock:
            self.queue_full_waits += 1

    # -- the poll thread: record only ------------------------------------------------------
    def record_report(self, err: ReportedError | None, msg: ReportedMessage) -> None:
        """One delivery report: acknowledged (`err` None) or failed (librdkafka's
        `on_delivery` signature, so the client can call it directly)."""
        if err is None:
            self.delivered += 1
            self.last_delivery_ts = self._clock()
            return
        self.failed += 1
        code, reason = self._record_error(err, client=False, topic=msg.topic() or "")
        if len(self.errors) < self._max_recorded:
            part = msg.partition()
            where = f"[{part}]" if part is not None and part >= 0 else " (no partition yet)"
            self.errors.append(f"{msg.topic()}{where}: {code}: {reason}")

    def record_refused(self, err: ReportedError, topic: str) -> None:
        """A send librdkafka refused at once (`produce()` raised, e.g. a topic it knows is
        forbidden): never queued, so no report follows; its error counts as met on `topic`
        (the telemetry's `errors`), not as a failed message. Any thread."""
        with self._lock:
            self._record_error(err, client=False, topic=topic)

    def record_throttle(self, broker: str, seconds: float) -> None:
        """A broker throttled the producer for `seconds` (0: it stopped), poll thread."""
        count = (self.throttle.count if self.throttle else 0) + (1 if seconds > 0 else 0)
        self.throttle = ThrottleSeen(count, self._clock(), max(0.0, seconds), broker)

    def record_client_error(self, err: ReportedError) -> None:
        """A client error (`error_cb`): counted and logged, not a message's failure."""
        self._record_error(err, client=True, topic="")

    def _record_error(self, err: ReportedError, *, client: bool, topic: str) -> tuple[str, str]:
        code = err.name()
        reason = self._scrub(err.str())
        now = self._clock()
        self.error_counts[code] = self.error_counts.get(code, 0) + 1
        self.last_error = {"code": code, "reason": reason, "ts": now, "fatal": err.fatal()}
        seen = self.errors_seen.pop((topic, code), None)
        if seen is None and len(self.errors_seen) >= MAX_ERRORS_SEEN:
            del self.errors_seen[next(iter(self.errors_seen))]  # the least recently met
        first = now if seen is None else seen.first_ts
        count = (seen.count if seen else 0) + 1
        self.errors_seen[(topic, code)] = ErrorSeen(code, topic, count, first, now)
        self._events.append(ErrorEvent(code, reason, client))
        return code, reason

    # -- readers ---------------------------------------------------------------------------
    @property
    def outstanding(self) -> int:
        """Messages enqueued with no delivery report yet."""
        return self.enqueued - self.delivered - self.failed

    def counters(self, in_queue: int) -> Counters:
        """The counts now, with librdkafka's own queue length."""
        return Counters(self.enqueued, self.delivered, self.failed, in_queue, self.queue_full_waits)

    def failure_reason(self, settled: bool, timeout_seconds: float) -> str | None:
        """Why the messages so far are not proven delivered, None when they are.

        `settled`: every message had its report before the wait of `timeout_seconds`
        ended. Any failed message fails the task even when everything settled.
        """
        if self.failed:
            return "delivery failed"
        if not settled:
            return f"not acknowledged within {timeout_seconds:g} s"
        return None

    def take_error_events(self) -> list[ErrorEvent]:
        """The errors recorded since the last call, oldest first (for logging)."""
        taken: list[ErrorEvent] = []
        while self._events:
            taken.append(self._events.popleft())
        return taken


class ErrorLogThrottle:
    """Each error code is logged at most once per `interval_seconds`, with the repeats
    suppressed since its previous line."""

    def __init__(self, interval_seconds: float) -> None:
        self._interval = interval_seconds
        self._logged: dict[str, tuple[float, int]] = {}

    def admit(self, code: str, now: float) -> int | None:
        """None to suppress this occurrence; else how many were suppressed before it."""
        last = self._logged.get(code)
        if last is not None and now - last[0] < self._interval:
            self._logged[code] = (last[0], last[1] + 1)
            return None
        self._logged[code] = (now, 0)
        return last[1] if last else 0
