"""The callback runner on its own: the job's callbacks on one thread of their own, in order.

Covered, with real threads and no Kafka:
- callbacks run in the order they were dispatched, on the runner's named thread,
  never on the dispatching thread, and `dispatch` returns while one still runs;
- a blocked callback shows in `status` (`pending` growing, `running_seconds`
  rising), `wait_drained` gives up at its deadline and succeeds once it is freed;
- a callback that raises is counted and logged, the first exception is kept, and the
  callbacks after it still run;
- `start` from many threads at once starts one thread; `stop` ends it after the
  queued callbacks, also when called from inside a callback (close() from a job
  callback), and is a no-op before `start`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from hangwatch_producer.callbacks import CallbackRunner
from hangwatch_testing.waiting import wait_for

NAME = "hangwatch-callbacks-unit"


@pytest.fixture
def runner() -> Iterator[CallbackRunner]:
    """A started runner; afterwards its thread must have ended."""
    started = CallbackRunner(NAME)
    started.start()
    yield started
    started.stop()
    wait_for(lambda: not _alive(NAME), 30, "the callback thread to end")


def _alive(name: str) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == name]


def test_callbacks_run_in_order_on_the_runners_thread(runner: CallbackRunner) -> None:
    calls: list[tuple[int, str]] = []

    def record(i: int) -> None:
        calls.append((i, threading.current_thread().name))

    for i in range(50):
        runner.dispatch(record, i)
    assert runner.wait_drained(time.monotonic() + 5)
    assert [i for i, _ in calls] == list(range(50))
    assert {name for _, name in calls} == {NAME}
    status = runner.status(time.monotonic())
    assert (status.pending, status.completed, status.errors) == (0, 50, 0)
    assert status.running_seconds is None


def test_a_blocked_callback_shows_and_delays_only_later_callbacks(runner: CallbackRunner) -> None:
    entered, release = threading.Event(), threading.Event()
    later: list[int] = []

    def block() -> None:
        entered.set()
        release.wait(30)

    try:
        runner.dispatch(block)
        assert entered.wait(5)
        for i in range(3):
            runner.dispatch(later.append, i)  # returns at once: the runner is busy
        first = runner.status(time.monotonic())
        assert first.pending == 4 and first.running_seconds is not None
        assert runner.status(time.monotonic() + 7.0).running_seconds == pytest.approx(
            first.running_seconds + 7.0, abs=0.5
        )
        assert not runner.wait_drained(time.monotonic() + 0.2)
        assert later == []
    finally:
        release.set()
    assert runner.wait_drained(time.monotonic() + 5)
    assert later == [0, 1, 2] and runner.pending == 0


def test_a_raising_callback_is_kept_and_the_rest_still_run(
    runner: CallbackRunner, caplog: pytest.LogCaptureFixture
) -> None:
    done: list[int] = []

    def broken(i: int) -> None:
        raise RuntimeError(f"bug {i}")

    runner.dispatch(broken, 1)
    runner.dispatch(done.append, 2)
    runner.dispatch(broken, 3)
    assert runner.wait_drained(time.monotonic() + 5)
    assert done == [2] and runner.errors == 2
    assert isinstance(runner.first_error, RuntimeError) and str(runner.first_error) == "bug 1"
    logged = [r for r in caplog.records if r.name == "hangwatch_producer.callbacks"]
    assert len(logged) == 2 and all(r.exc_info for r in logged)


def test_concurrent_starts_start_one_thread() -> None:
    runner = CallbackRunner(NAME)
    gate = threading.Barrier(8)

    def start() -> None:
        gate.wait()
        runner.start()

    starters = [threading.Thread(target=start) for _ in range(8)]
    for starter in starters:
        starter.start()
    for starter in starters:
        starter.join()
    try:
        assert len(_alive(NAME)) == 1
    finally:
        runner.stop()
    wait_for(lambda: not _alive(NAME), 5, "the callback thread to end")


def test_stop_from_inside_a_callback_does_not_wait_on_itself() -> None:
    runner = CallbackRunner(NAME)
    runner.start()
    returned = threading.Event()

    def close_from_callback() -> None:
        runner.stop()
        returned.set()

    runner.dispatch(close_from_callback)
    assert returned.wait(5), "stop() inside a callback waited on its own thread"
    wait_for(lambda: not _alive(NAME), 5, "the callback thread to end")


def test_stop_before_start_is_a_no_op() -> None:
    runner = CallbackRunner(NAME)
    runner.stop()
    assert not _alive(NAME) and runner.wait_drained(time.monotonic())
