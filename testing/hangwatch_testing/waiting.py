"""Polling until something holds: the one `wait_for` and `stays` of tests and benchmarks.

Real components answer in their own time (a sidecar's next round, Prometheus's next
evaluation, a Spark task), so tests poll for the state they expect with a deadline
instead of sleeping a fixed time. A timeout fails with what was awaited and, when the
caller gives one, the context that explains it (an operator's log, say).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_for(
    predicate: Callable[[], T | None],
    timeout: float,
    what: str,
    *,
    interval: float = 0.05,
    give_up: Callable[[], bool] | None = None,
    context: Callable[[], str] | None = None,
) -> T:
    """Poll `predicate` until it returns something truthy, and return that.

    Fails (AssertionError) after `timeout` seconds, or at once when `give_up()` says
    waiting is pointless (the process being watched exited); the message names `what`
    and ends with `context()` when given.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        gave_up = give_up is not None and give_up()
        if gave_up or time.monotonic() > deadline:
            why = "gave up" if gave_up else f"timed out after {timeout} s"
            detail = f"\n{context()}" if context is not None else ""
            raise AssertionError(f"{why} waiting for {what}{detail}")
        time.sleep(interval)


def stays(predicate: Callable[[], object], seconds: float, what: str) -> None:
    """Assert `predicate` stays truthy for `seconds` (checked every 50 ms)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert predicate(), f"{what} stopped holding"
        time.sleep(0.05)
