"""Spark snapshots over time -> `SparkView`: how long tasks run and threads stay put (pure).

A thread dump is one moment; a hang is a state that does not change. `SparkTracker`
remembers, on the sidecar's monotonic clock, when each task (by its TID, unique in the
application) was first seen running and since when each producer thread has been in
its current activity (same thread, same activity, same user frame in consecutive
dumps; and, when the dump tells a thread's CPU time - a local HotSpot dump does, Spark's
REST answer does not - the same CPU time: a thread that ran between two dumps left its
place and came back, as a callback that logs every acknowledgement does hundreds of
times a second, so its stay starts again - unless it is the I/O thread waiting inside
its callback for what only it can do in both dumps, as S4's does: a `max.block.ms`
timeout lets it out and the next callback brings it back to the same deadlock).
Durations are lower bounds: Spark's thread dump carries no start times, and a task that
started before the sidecar's first read counts from that read.

A task is a straggler when it has run past the stall threshold and past
`STRAGGLER_FACTOR` times the median duration of its stage's finished tasks, with at
least `MIN_PEERS` of them finished. A failed read gives an unavailable view and keeps
the memory, so a driver that is briefly unreachable does not reset the clocks.
"""

from __future__ import annotations

from hangwatch_sidecar.spark.types import (
    ProducerThread,
    RunningTask,
    SparkSnapshot,
    SparkView,
    StagePeers,
    TaskThread,
    ThreadObservation,
)

STRAGGLER_FACTOR = 3.0
"""Spark's own speculation relaunches a task at 1.5 times its stage's median
(`spark.speculation.multiplier`); hangwatch's evidence can lead to a restart, so it
waits for twice that."""
MIN_PEERS = 3
"""Finished tasks of the stage needed before a median means anything."""


class SparkTracker:
    """Memory of tasks and producer threads across reads of one executor."""

    def __init__(self, stall_seconds: float, executor_id: str = "") -> None:
        self.stall_seconds = stall_seconds
        self.executor_id = executor_id
        self._tasks: dict[int, float] = {}
        self._threads: dict[tuple[object, ...], float] = {}
        self._cpu: dict[tuple[object, ...], tuple[float | None, bool]] = {}
        """Per thread key: its CPU time in the last dump and whether it waited for itself."""

    def seen_for(self, task_id: int, at: float) -> float:
        """How long task `task_id` has been seen running as of `at` (0 for a new one)."""
        first = self._tasks.get(task_id)
        return 0.0 if first is None else at - first

    def _running(self, task: TaskThread, at: float, peers: StagePeers | None) -> RunningTask:
        running = at - self._tasks.setdefault(task.task_id, at)
        straggler = (
            peers is not None
            and peers.median_seconds is not None
            and peers.complete >= MIN_PEERS
            and running >= self.stall_seconds
            and running >= STRAGGLER_FACTOR * peers.median_seconds
        )
        return RunningTask(task, running, peers, straggler)

    def _held(self, thread: ProducerThread, at: float) -> ThreadObservation:
        key, cpu, deadlocked = thread.key, thread.cpu_ms, thread.waits_for_itself
        before, was_deadlocked = self._cpu.get(key, (None, False))
        moved = cpu is not None and before is not None and cpu != before
        if moved and not (deadlocked and was_deadlocked):
            self._threads[key] = at  # it ran since the last dump: a new stay, not the same one
        self._cpu[key] = (cpu, deadlocked)
        return ThreadObservation(thread, at - self._threads.setdefault(key, at))

    def observe(self, snapshot: SparkSnapshot) -> SparkView:
        """The view after `snapshot` (the newest read of the driver)."""
        if not snapshot.ok:
            return SparkView(
                at=snapshot.at,
                available=False,
                error=snapshot.error,
                application_id=snapshot.application_id,
                executor_id=self.executor_id,
                source=snapshot.source,
                spark_executor=snapshot.spark_executor,
            )
        at = snapshot.at
        tasks = tuple(
            self._running(t, at, snapshot.stages.get(t.stage) if t.stage else None)
            for t in snapshot.tasks
        )
        threads = tuple(self._held(t, at) for t in snapshot.threads)
        live_tasks = {t.task_id for t in snapshot.tasks}
        live_threads = {t.key for t in snapshot.threads}
        if snapshot.thread_dump:  # without a dump nothing is known of tasks and threads
            self._tasks = {k: v for k, v in self._tasks.items() if k in live_tasks}
            self._threads = {k: v for k, v in self._threads.items() if k in live_threads}
            self._cpu = {k: v for k, v in self._cpu.items() if k in live_threads}
        return SparkView(
            at=at,
            available=True,
            tasks=tasks,
            threads=threads,
            thread_dump=snapshot.thread_dump,
            counts=snapshot.counts,
            application_id=snapshot.application_id,
            executor_id=self.executor_id,
            source=snapshot.source,
            spark_executor=snapshot.spark_executor,
        )


def aged(view: SparkView, now: float, max_age_seconds: float) -> SparkView:
    """`view`, or an unavailable one when it is older than `max_age_seconds` (the driver has
    not answered for that long: its old answers are not evidence any more)."""
    age = now - view.at
    if not view.available or age <= max_age_seconds:
        return view
    whom = "the driver" if view.source == "driver" else "the local JVM"
    return SparkView(
        at=view.at,
        available=False,
        error=f"no answer from {whom} for {age:.0f} s (a read is still under way)",
        application_id=view.application_id,
        executor_id=view.executor_id,
        source=view.source,
        spark_executor=view.spark_executor,
    )
