"""What a pipeline run tells its user: a progress line every few seconds and a final summary.

Fed by `job.run_pipeline`: task counts come from Spark's status tracker (stages of the
run's job group: tasks done, running, failed attempts), message counts from the
job's accumulators (which Spark merges when a task *succeeds*, so they only move when
a task finishes, and a failed attempt's counts are never in them). The retry figures
come from each successful task's `TaskContext.attemptNumber()`: an attempt number n
means the n attempts before it failed. Formatting is pure and tested without Spark;
only `ProgressReporter` runs a thread.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import IO, Any

_EXCEPTION_LINE = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Failed|Failure|Interrupt)): \S")
_JVM_PACKAGES = ("org.", "java.", "javax.", "scala.", "py4j.", "io.")


@dataclass(frozen=True)
class TaskCounts:
    """Task figures of a run's stages, summed (Spark's SparkStageInfo fields)."""

    total: int = 0
    done: int = 0
    running: int = 0
    failed_attempts: int = 0


@dataclass(frozen=True)
class Tallies:
    """The accumulators' values: counted by tasks that succeeded."""

    sent: int = 0
    """Messages handed to the producer (`enqueued`)."""
    acknowledged: int = 0
    """Messages the cluster acknowledged (`delivered`)."""
    tasks: int = 0
    """Tasks that succeeded."""
    retried_tasks: int = 0
    """Succeeded tasks whose successful attempt was not their first."""
    earlier_attempts: int = 0
    """Sum of the successful attempts' attempt numbers: failed attempts before them."""


@dataclass(frozen=True)
class Summary:
    """The outcome of one run, printed at the end (`render`, or `as_json`)."""

    run_id: str
    topic: str
    master: str
    application_id: str | None
    expected: int | None
    """Events to send (None when reading files: not known up front)."""
    partitions: int
    tallies: Tallies
    failed_attempts: int
    """Failed task attempts: the status tracker's count, never less than the accumulators'."""
    duration_seconds: float
    error: str | None = None
    """Why the Spark job failed (a task used up its attempts), None when it succeeded."""

    @property
    def ok(self) -> bool:
        """The job succeeded and every message sent was acknowledged."""
        t = self.tallies
        complete = self.expected is None or t.sent == self.expected
        return self.error is None and complete and t.acknowledged == t.sent

    @property
    def events_per_second(self) -> float:
        """Acknowledged events per second of run time."""
        return self.tallies.acknowledged / self.duration_seconds if self.duration_seconds else 0.0

    def as_json(self) -> dict[str, Any]:
        """The summary as a JSON-ready dict (stable field names)."""
        return {
            "run_id": self.run_id,
            "topic": self.topic,
            "master": self.master,
            "application_id": self.application_id,
            "ok": self.ok,
            "expected": self.expected,
            "partitions": self.partitions,
            **asdict(self.tallies),
            "failed_attempts": self.failed_attempts,
            "duration_seconds": round(self.duration_seconds, 3),
            "events_per_second": round(self.events_per_second, 1),
            "error": self.error,
        }

    def render(self) -> str:
        """The human summary, a few aligned lines."""
        t = self.tallies
        expected = "from files" if self.expected is None else f"{self.expected:,}"
        lines = [
            f"pipeline run {self.run_id}: topic {self.topic}, master {self.master}, "
            f"application {self.application_id or '-'}",
            f"  events         {expected}",
            f"  sent           {t.sent:,}",
            f"  acknowledged   {t.acknowledged:,}",
            f"  tasks          {t.tasks:,} of {self.partitions:,} succeeded",
            f"  retried tasks  {t.retried_tasks:,} "
            f"(failed task attempts: {self.failed_attempts:,})",
            f"  duration       {self.duration_seconds:.1f} s "
            f"({self.events_per_second:,.0f} events/s acknowledged)",
        ]
        if self.error is not None:
            lines.append(f"FAILED: {self.error}")
        elif self.ok:
            lines.append("OK: every event was acknowledged by Kafka (at-least-once per task)")
        else:
            lines.append("FAILED: not every event was sent and acknowledged")
        return "\n".join(lines)


def progress_line(
    elapsed_seconds: float, tasks: TaskCounts, tallies: Tallies, expected: int | None
) -> str:
    """One progress line: tasks and events acknowledged so far (by finished tasks)."""
    of = "" if expected is None else f"/{expected:,}"
    failed = tasks.failed_attempts
    plural = "" if failed == 1 else "s"
    return (
        f"[pipeline {elapsed_seconds:6.1f} s] tasks {tasks.done}/{tasks.total} done, "
        f"{tasks.running} running, {failed} failed attempt{plural}; "
        f"{tallies.acknowledged:,}{of} events acknowledged by finished tasks"
    )


def failure_reason(exc: BaseException) -> str:
    """The one line that says why a Spark job failed: the Python exception of the last
    failed attempt (`DeliveryFailed: ...`), else Spark's "Job aborted ..." line."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    for line in reversed(lines):
        match = _EXCEPTION_LINE.match(line)
        if match and not match.group(1).startswith(_JVM_PACKAGES):
            return line
    aborted = next((line for line in lines if "Job aborted" in line), None)
    return aborted or (lines[0] if lines else type(exc).__name__)


class ProgressReporter:
    """Prints `line()` to `stream` every `interval_seconds` until stopped (`line` must
    not raise: it is the caller's to turn a failed status query into a line)."""

    def __init__(self, line: Callable[[], str], interval_seconds: float, stream: IO[str]) -> None:
        self._line = line
        self._interval = interval_seconds
        self._stream = stream
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="pipeline-progress")
        self._thread.daemon = True

    def __enter__(self) -> ProgressReporter:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5.0)

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            print(self._line(), file=self._stream, flush=True)
