"""Spark snapshots over time -> a view (durations, stragglers) -> findings for the verdict engine.

Covers the tracker: a task's running time counts from the first read that saw it (a
new TID starts again at 0), a thread's time in an activity resets when the activity or
the user frame changes, a failed read gives an unavailable view without resetting the
clocks, a view older than its maximum age becomes unavailable, `task_running` is
True/False/None (the executor list's counts when no thread dump could be had); the
straggler rule at its boundaries (stall threshold, 3x the median, at least 3 finished
peers). And the judge: the I/O thread inside user code for the heartbeat threshold ->
`producer_hung` naming the thread (below it: nothing); waiting for metadata for the
stall threshold -> `metadata_stale` once the executor has finished a task (before:
corroborating); for a send's result -> `producer_hung`; flush or
buffer waits -> `producer_hung` only with a straggler task, otherwise corroborating;
a straggler alone and failed attempts -> corroborating only; with some broker failing
nothing is a producer fault; an unavailable view -> no finding.
"""

from __future__ import annotations

import pytest

from hangwatch.contracts import Verdict
from hangwatch_sidecar.spark.judge import judge_spark
from hangwatch_sidecar.spark.tracking import SparkTracker, aged
from hangwatch_sidecar.spark.types import (
    Activity,
    ExecutorCounts,
    RunningTask,
    ThreadObservation,
)

from .spark_builders import network, peers, snapshot, task, thread, view

STALL, HEARTBEAT = 30.0, 15.0


def _judge(v: object, healthy: bool = True) -> tuple[object, ...]:
    return judge_spark(
        v,  # type: ignore[arg-type]
        stall_seconds=STALL,
        heartbeat_seconds=HEARTBEAT,
        cluster_healthy=healthy,
    )


def test_task_time_counts_from_first_sight_and_restarts_with_a_new_tid() -> None:
    tracker = SparkTracker(STALL, "3")
    first = tracker.observe(snapshot(10.0, tasks=(task(7),)))
    assert first.task_running is True and first.task_running_seconds == 0.0
    later = tracker.observe(snapshot(52.0, tasks=(task(7),)))
    assert later.task_running_seconds == pytest.approx(42.0)
    retried = tracker.observe(snapshot(60.0, tasks=(task(8, attempt=1),)))
    assert retried.task_running_seconds == 0.0
    idle = tracker.observe(snapshot(70.0))
    assert idle.task_running is False and idle.task_running_seconds is None


def test_thread_time_resets_when_its_activity_or_callback_changes() -> None:
    tracker = SparkTracker(STALL)
    waiting = thread(Activity.AWAITING_METADATA)
    tracker.observe(snapshot(0.0, threads=(waiting,)))
    held = tracker.observe(snapshot(20.0, threads=(waiting,))).threads[0].held_seconds
    assert held == 20.0
    moved = thread(Activity.AWAITING_BUFFER)
    assert tracker.observe(snapshot(25.0, threads=(moved,))).threads[0].held_seconds == 0.0
    io = network()
    tracker.observe(snapshot(30.0, threads=(io,)))
    other = network().__class__(**{**vars(io), "user_frame": "com.example.Other.onCompletion"})
    assert tracker.observe(snapshot(40.0, threads=(other,))).threads[0].held_seconds == 0.0


def test_failed_read_is_unavailable_and_keeps_the_clocks() -> None:
    tracker = SparkTracker(STALL, "3")
    tracker.observe(snapshot(0.0, tasks=(task(7),), threads=(network(),)))
    down = tracker.observe(snapshot(10.0, error="connection refused", error_kind="refused"))
    assert not down.available and down.task_running is None and down.error == "connection refused"
    back = tracker.observe(snapshot(40.0, tasks=(task(7),), threads=(network(),)))
    assert back.task_running_seconds == 40.0 and back.threads[0].held_seconds == 40.0


def test_executor_counts_tell_a_running_task_without_a_thread_dump() -> None:
    tracker = SparkTracker(STALL)
    tracker.observe(snapshot(0.0, tasks=(task(7),)))
    counted = tracker.observe(snapshot(5.0, counts=ExecutorCounts(1, 0, 4), thread_dump=False))
    assert counted.task_running is True and counted.task_running_seconds is None
    again = tracker.observe(snapshot(9.0, tasks=(task(7),)))
    assert again.task_running_seconds == 9.0  # the memory survived the dump-less read


def test_an_old_view_is_not_evidence() -> None:
    v = view(tasks=(RunningTask(task(), 40.0),))
    assert aged(v, now=130.0, max_age_seconds=30.0) is v
    old = aged(v, now=131.0, max_age_seconds=30.0)
    assert not old.available and "31 s" in (old.error or "")


@pytest.mark.parametrize(
    ("running", "median", "complete", "straggler"),
    [
        (31.0, 2.0, 10, True),
        (29.0, 2.0, 10, False),  # below the stall threshold
        (31.0, 11.0, 10, False),  # not 3x the median
        (33.0, 11.0, 10, True),
        (31.0, 2.0, 2, False),  # too few finished peers
        (31.0, None, 10, False),  # nothing finished yet
    ],
)
def test_straggler_rule(
    running: float, median: float | None, complete: int, straggler: bool
) -> None:
    tracker = SparkTracker(STALL)
    tracker.observe(snapshot(0.0, tasks=(task(7),)))
    stage = {(3, 0): peers(complete=complete, median=median)}
    v = tracker.observe(snapshot(running, tasks=(task(7),), stages=stage))
    assert v.tasks[0].straggler is straggler
    assert (v.straggler is not None) is straggler


def _held(t: object, seconds: float) -> ThreadObservation:
    return ThreadObservation(t, seconds)  # type: ignore[arg-type]


def test_io_thread_in_a_callback_past_the_heartbeat_is_producer_hung() -> None:
    (finding,) = _judge(view(threads=(_held(network(), 15.0),)))
    assert finding.verdict is Verdict.PRODUCER_HUNG
    assert "kafka-producer-network-thread | orders" in finding.reason
    assert "com.example.Cb.onCompletion" in finding.reason and "15 s" in finding.reason
    assert _judge(view(threads=(_held(network(), 14.9),))) == ()
    sending = network(Activity.SENDING, "RUNNABLE")
    assert _judge(view(threads=(_held(sending, 500.0),))) == ()


@pytest.mark.parametrize(
    ("activity", "verdict"),
    [
        (Activity.AWAITING_METADATA, Verdict.METADATA_STALE),
        (Activity.AWAITING_RESULT, Verdict.PRODUCER_HUNG),
        (Activity.FLUSHING, None),
        (Activity.AWAITING_BUFFER, None),
    ],
)
def test_task_thread_waits_past_the_stall_threshold(activity: Activity, verdict: object) -> None:
    running = RunningTask(task(7), 40.0, peers())
    at = _held(thread(activity), 30.0)
    (finding,) = _judge(view(tasks=(running,), threads=(at,), completed_tasks=1))
    assert finding.verdict is verdict
    assert "task 1.0 of stage 3.0 (TID 7)" in finding.reason and "30 s" in finding.reason
    assert _judge(view(tasks=(running,), threads=(_held(thread(activity), 29.0),))) == ()
    (first,) = _judge(view(tasks=(running,), threads=(at,), completed_tasks=0))
    if activity is Activity.AWAITING_METADATA:  # no view yet to be wrong
        assert first.verdict is None and "has finished no task yet" in first.reason
    else:  # the other waits do not depend on a view the producer had
        assert first.verdict is verdict


@pytest.mark.parametrize("activity", [Activity.FLUSHING, Activity.AWAITING_BUFFER])
def test_flush_or_buffer_wait_of_a_straggler_is_producer_hung(activity: Activity) -> None:
    straggler = RunningTask(task(7), 95.0, peers(median=2.0), straggler=True)
    found = _judge(view(tasks=(straggler,), threads=(_held(thread(activity), 31.0),)))
    assert found[0].verdict is Verdict.PRODUCER_HUNG
    assert "48x the median 2.0 s of its stage's 10 finished tasks" in found[0].reason
    assert found[1].verdict is None and "straggler" in found[1].reason


@pytest.mark.parametrize("activity", [Activity.FLUSHING, Activity.AWAITING_BUFFER])
def test_a_straggler_waiting_while_the_io_thread_loops_only_corroborates(
    activity: Activity,
) -> None:
    """A quota's throttle: the I/O thread in its own loop, the task waiting on it."""
    straggler = RunningTask(task(7), 95.0, peers(median=2.0), straggler=True)
    io = _held(network(Activity.SENDING, "RUNNABLE"), 95.0)
    threads = (_held(thread(activity), 31.0), io)
    found = _judge(view(tasks=(straggler,), threads=threads))
    assert [f.verdict for f in found] == [None, None]
    assert "quota" in found[0].reason and "no restart" in found[0].reason
    gone = _judge(view(tasks=(straggler,), threads=threads[:1]))  # the I/O thread is gone
    assert gone[0].verdict is Verdict.PRODUCER_HUNG


def test_a_straggler_and_failed_attempts_alone_only_corroborate() -> None:
    straggler = RunningTask(task(7, attempt=2), 95.0, peers(failed=3), straggler=True)
    found = _judge(view(tasks=(straggler,)))
    assert [f.verdict for f in found] == [None, None]
    assert "a straggler" in found[0].reason
    assert "3 failed task attempts; this is attempt 3" in found[1].reason


def test_with_a_broker_failing_nothing_is_a_producer_fault() -> None:
    threads = (_held(network(), 60.0), _held(thread(Activity.AWAITING_METADATA), 60.0))
    found = _judge(view(threads=threads), healthy=False)
    assert [f.verdict for f in found] == [None, None]
    assert all("not judged a producer fault" in f.reason for f in found)


def test_unavailable_or_missing_view_gives_no_finding() -> None:
    assert _judge(None) == ()
    down = view(threads=(_held(network(), 60.0),)).__class__(at=0.0, available=False, error="x")
    assert _judge(down) == ()
