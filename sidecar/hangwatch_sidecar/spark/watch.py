"""The Spark view's cadence: reads of the driver in the background, never in a round's way.

`SparkWatch.poll` is called by every evaluation round. It starts a read of the driver
(`DriverReader`) on the loop's thread pool when one is due and none is under way, and
returns the newest `SparkView` at once: a round never waits for the driver, so a slow,
blackholed or hostile driver cannot delay a verdict (its reads time out on their own;
a view older than `max_age_seconds` counts as unavailable). A read first takes the
executor's thread dump; only tasks that have already run for half the stall threshold
cost two more requests (their stage's counts and finished tasks' median). Whenever
the driver answered, the application's executor failure budget is read too
(`spark.failures`: its version and environment once, `allexecutors` each time), so a
healthy executor costs the driver two requests per interval. State changes of the
view (available, unavailable and why) are logged once, not every round.

The same watch drives the local source (`spark.attach.LocalReader`: a thread dump of the
pod's own JVM through the attach mechanism), with no stage peers and no failure budget
(both are the driver's to tell).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import Executor, Future
from dataclasses import replace

from hangwatch.wire.status import FailureBudget
from hangwatch_sidecar.spark.answers import AnswerError
from hangwatch_sidecar.spark.attach import LocalReader
from hangwatch_sidecar.spark.client import DriverError, DriverReader
from hangwatch_sidecar.spark.tracking import SparkTracker, aged
from hangwatch_sidecar.spark.types import FailedAttempt, ReadStats, SparkSnapshot, SparkView

log = logging.getLogger(__name__)

UNREACHABLE = frozenset({"refused", "timeout", "dns", "network"})
"""Read errors after which the failure budget is not asked for (the driver did not answer)."""


class SparkWatch:
    """Owns the reader, the tracker and the newest view of one executor."""

    def __init__(
        self,
        reader: DriverReader | LocalReader,
        tracker: SparkTracker,
        pool: Executor,
        interval_seconds: float,
        max_age_seconds: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.reader, self.tracker, self.pool, self.clock = reader, tracker, pool, clock
        self.interval_seconds, self.max_age_seconds = interval_seconds, max_age_seconds
        local = isinstance(reader, LocalReader)
        self._view = SparkView(
            at=clock(),
            available=False,
            error=f"first read of the {'local JVM' if local else 'driver'} under way",
            application_id=reader.application_id,
            executor_id=tracker.executor_id,
            source="jvm" if local else "driver",
        )
        self._future: Future[None] | None = None
        self._next = clock()
        self._errors: Counter[str] = Counter()
        self._stats = ReadStats()
        self._budget: FailureBudget | None = None
        self._failed_tasks: int | None = None
        self._attempts: tuple[FailedAttempt, ...] = ()
        self._completed: int | None = None
        self._lock = threading.Lock()

    @property
    def stats(self) -> ReadStats:
        with self._lock:
            return self._stats

    @property
    def classpath(self) -> tuple[str, ...]:
        """The application's classpath entries as the driver last said (empty: not read,
        or the local JVM's view)."""
        return self.reader.classpath if isinstance(self.reader, DriverReader) else ()

    @property
    def budget(self) -> FailureBudget | None:
        """The application's executor failure budget as last read (None: not yet, or
        the driver did not tell)."""
        with self._lock:
            return self._budget

    def poll(self) -> SparkView:
        """The newest view (aged); starts a read when one is due. Never waits."""
        now = self.clock()
        if self._future is not None and self._future.done():
            self._future = None
        if self._future is None and now >= self._next:
            self._next = now + self.interval_seconds
            self._future = self.pool.submit(self._read)
        with self._lock:
            view = self._view
            if view.available and (self._attempts or self._completed is not None):
                view = replace(
                    view, failed_attempts=self._attempts, completed_tasks=self._completed
                )
        return aged(view, now, self.max_age_seconds)

    def _read(self) -> None:
        driver = self.reader if isinstance(self.reader, DriverReader) else None
        try:
            snapshot = self.reader.read()
            if snapshot.ok and driver is not None:
                snapshot = self._with_peers(driver, snapshot)
        except Exception as exc:  # a bug in a read must not stop the watch
            log.exception("Spark view read failed")
            snapshot = SparkSnapshot(
                at=self.clock(), error=f"read failed: {type(exc).__name__}", error_kind="bad_answer"
            )
        view = self.tracker.observe(snapshot)
        self._record(snapshot, view)
        if driver is not None and (snapshot.ok or snapshot.error_kind not in UNREACHABLE):
            self._read_budget(driver)  # the driver answers (about this executor or not)

    def _read_budget(self, driver: DriverReader) -> None:
        try:
            budget = driver.read_budget(time.time())
        except (DriverError, AnswerError) as exc:
            log.debug("failure budget unavailable", extra={"error": str(exc)})
            return
        with self._lock:
            was, self._budget = self._budget, budget
            self._completed = driver.counts.completed_tasks if driver.counts else None
        self._read_failed_attempts(driver)
        if was is None or was.remaining != budget.remaining:
            log.info(
                "Spark failure budget",
                extra={"max_failures": budget.max_failures, "failures": budget.failures,
                       "remaining": budget.remaining},
            )  # fmt: skip

    def _read_failed_attempts(self, driver: DriverReader) -> None:
        """When this executor's failed task count grew: its failed attempts (what each
        failed with), each stamped with when the sidecar first saw it."""
        count, was = (driver.counts.failed_tasks if driver.counts else None), self._failed_tasks
        self._failed_tasks = count
        if count is None or count <= (was or 0):
            return
        try:
            read = driver.read_failed_attempts()
        except (DriverError, AnswerError) as exc:
            log.debug("failed task attempts unavailable", extra={"error": str(exc)})
            return
        now, wall = self.clock(), time.time()

        def seen(attempt: FailedAttempt) -> float:
            if attempt.ended_ts is None:
                return now
            return now - max(0.0, wall - attempt.ended_ts)

        with self._lock:
            known = {a.task_id: a.seen_at for a in self._attempts}
            self._attempts = tuple(replace(a, seen_at=known.get(a.task_id, seen(a))) for a in read)
        log.info(
            "failed task attempts of this executor",
            extra={"failed_tasks": count, "attempts": [a.label for a in read[:5]]},
        )

    def _with_peers(self, driver: DriverReader, snapshot: SparkSnapshot) -> SparkSnapshot:
        half = self.tracker.stall_seconds / 2
        due = [t for t in snapshot.tasks if self.tracker.seen_for(t.task_id, snapshot.at) >= half]
        if not due:
            return snapshot
        client = driver.client
        before = (client.requests, client.response_bytes)
        try:
            stages = driver.read_peers(due)
        except DriverError as exc:
            log.debug("stage peers unavailable", extra={"error": str(exc)})
            stages = {}
        return replace(
            snapshot,
            stages=stages,
            requests=snapshot.requests + client.requests - before[0],
            response_bytes=snapshot.response_bytes + client.response_bytes - before[1],
            read_seconds=self.clock() - snapshot.at,
        )

    def _record(self, snapshot: SparkSnapshot, view: SparkView) -> None:
        with self._lock:
            was = self._view
            if not snapshot.ok:
                self._errors[snapshot.error_kind or "bad_answer"] += 1
            self._view = view
            self._stats = ReadStats(
                reads=self._stats.reads + 1,
                errors=tuple(sorted(self._errors.items())),
                last_read_seconds=snapshot.read_seconds,
                last_requests=snapshot.requests,
                last_response_bytes=snapshot.response_bytes,
                driver_up=snapshot.ok,
            )
        if view.available != was.available or (not view.available and view.error != was.error):
            extra = {"spark_available": view.available, "error": view.error, "source": view.source}
            if view.available:
                log.info("Spark view available", extra={**extra, "tasks": len(view.tasks)})
            else:
                log.warning("Spark view unavailable", extra=extra)

    def close(self) -> None:
        """Forget an unfinished read (it ends by its own deadline)."""
        self._future = None
