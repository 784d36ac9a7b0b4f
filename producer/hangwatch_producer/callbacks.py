"""The callback runner: the job's own callbacks run on a thread of their own, in order.

The lesson of incident S4: a delivery callback that called a blocking `send().get()`
ran on the client's only I/O thread, which then waited on itself forever. The
producer wrapper's poll thread (the only one that serves librdkafka) therefore never
runs the job's code: it `dispatch`es the job's `on_delivery`, `error_cb` and
`throttle_cb` calls here and returns at once. One daemon thread,
`hangwatch-callbacks-<n>`, started the first time a producer has a job callback, runs
them in the order they were dispatched. A job callback may call `send()` or `flush()`
(those wait on the poll thread, which is free); one that blocks delays only the job
callbacks after it, and shows in the telemetry (`status`: `pending` growing,
`running_seconds` rising). At close the producer waits a bounded time (`wait_drained`),
then reports a callback still running, or the first that raised (`first_error`), as
`CallbackError`; a stuck thread is left behind (a daemon: it does not keep the process
alive).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

from hangwatch_producer.snapshot import CallbackStatus

log = logging.getLogger(__name__)

_Call = tuple[Callable[..., Any], tuple[Any, ...]]


class CallbackRunner:
    """The thread that runs one producer's job callbacks, and how far it got."""

    def __init__(self, thread_name: str) -> None:
        self._thread_name = thread_name
        self._calls: queue.SimpleQueue[_Call | None] = queue.SimpleQueue()
        self._start_lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._queued = self._done = self._errors = 0
        self._running_since: float | None = None
        self.first_error: BaseException | None = None
        """The first exception a job callback raised (chained to `CallbackError`)."""

    def start(self) -> None:
        """Start the thread unless it runs already (any thread may call this)."""
        with self._start_lock:
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name=self._thread_name, daemon=True
                )
                self._thread.start()

    def dispatch(self, fn: Callable[..., Any], *args: Any) -> None:
        """Queue `fn(*args)` and return at once (called on the poll thread only)."""
        self._queued += 1
        self._calls.put((fn, args))

    def _run(self) -> None:
        while (call := self._calls.get()) is not None:
            fn, args = call
            self._running_since = time.monotonic()
            try:
                fn(*args)
            except Exception as exc:  # the job's code: recorded and raised at close
                self._errors += 1
                if self.first_error is None:
                    self.first_error = exc
                log.exception("on_delivery callback raised")
            finally:
                self._running_since = None
                self._done += 1

    @property
    def pending(self) -> int:
        """Job callbacks queued or running."""
        return self._queued - self._done

    @property
    def errors(self) -> int:
        """Job callbacks that raised."""
        return self._errors

    def status(self, now_monotonic: float) -> CallbackStatus:
        """How far the thread got, as telemetry reports it."""
        running = self._running_since
        return CallbackStatus(
            pending=self.pending,
            running_seconds=None if running is None else now_monotonic - running,
            completed=self._done,
            errors=self._errors,
        )

    def wait_drained(self, deadline: float) -> bool:
        """Wait until every dispatched callback finished; False at `deadline` (monotonic)."""
        while self._queued > self._done:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            time.sleep(min(remaining, 0.01))
        return True

    def stop(self) -> None:
        """End the thread after the callbacks already queued; wait for it briefly, never
        when called from a job callback (close() from inside one)."""
        thread = self._thread
        if thread is None:
            return
        self._calls.put(None)
        if thread is not threading.current_thread():
            thread.join(0.5)
