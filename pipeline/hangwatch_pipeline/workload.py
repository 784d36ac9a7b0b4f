"""The reference pipeline's workload: the events a run writes and how they split into tasks.

Sink-independent (the wrapper's sink, `wrapper_sink`, and Spark's Kafka sink,
`connector_sink`, both use it): generated events (`sc.range` -> `events.generate_event`)
or records read from files (`sc.textFile` + `zipWithIndex` -> `events.parse_*`),
enriched (`events.enrich`); the partition count and each task's pace; the run's
accumulators and the task counts of Spark's status tracker.
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import IO, Any

from py4j.protocol import Py4JError  # type: ignore[import-untyped]
from pyspark import RDD, SparkContext
from pyspark.accumulators import Accumulator
from pyspark.errors import PySparkException

from hangwatch.errors import UsageError
from hangwatch_pipeline.events import (
    csv_header,
    enrich,
    generate_event,
    parse_csv_line,
    parse_json_line,
)
from hangwatch_pipeline.run_options import RunOptions
from hangwatch_pipeline.run_report import (
    ProgressReporter,
    Summary,
    Tallies,
    TaskCounts,
    progress_line,
)

EVENTS_PER_TASK = 25_000
"""Target size of a task when the partition count is chosen: small enough that a
retried task resends little, large enough that producer start-up is noise."""

PACED_TASK_SECONDS = 5.0
"""Target duration of a task in a paced run (`--rate`)."""

MAX_PARTITIONS = 10_000

APP_ID_PROPERTY = "spark.app.id"
"""Local property the producer wrapper reads for the telemetry `application_id`."""


@dataclass(frozen=True)
class JobAccumulators:
    """The run's accumulators; tasks add to them once they succeeded."""

    sent: Accumulator[int]
    acknowledged: Accumulator[int]
    tasks: Accumulator[int]
    retried_tasks: Accumulator[int]
    earlier_attempts: Accumulator[int]

    @classmethod
    def create(cls, sc: SparkContext) -> JobAccumulators:
        return cls(*(sc.accumulator(0) for _ in range(5)))

    def record(self, sent: int, acknowledged: int, attempt: int) -> None:
        """Called by a task after its producer closed cleanly."""
        self.sent.add(sent)
        self.acknowledged.add(acknowledged)
        self.tasks.add(1)
        self.retried_tasks.add(1 if attempt > 0 else 0)
        self.earlier_attempts.add(attempt)

    def tallies(self) -> Tallies:
        """The values merged on the driver so far (from finished tasks)."""
        return Tallies(
            sent=self.sent.value,
            acknowledged=self.acknowledged.value,
            tasks=self.tasks.value,
            retried_tasks=self.retried_tasks.value,
            earlier_attempts=self.earlier_attempts.value,
        )


def generated_event(run_id: str, seq: int) -> dict[str, Any]:
    """Event `seq` of a generated run, enriched, stamped now."""
    return enrich(generate_event(seq, run_id, time.time()))


def _json_event(run_id: str, line_and_seq: tuple[str, int]) -> dict[str, Any]:
    return enrich(parse_json_line(line_and_seq[0], line_and_seq[1], run_id))


def _csv_event(columns: list[str], run_id: str, line_and_seq: tuple[str, int]) -> dict[str, Any]:
    return enrich(parse_csv_line(line_and_seq[0], columns, line_and_seq[1], run_id))


def _data_line(header: str | None, line: str) -> bool:
    return bool(line.strip()) and line != header


def partition_count(options: RunOptions, default_parallelism: int) -> int:
    """Tasks of the run: as given, else about `EVENTS_PER_TASK` events each, or in a paced
    run about `PACED_TASK_SECONDS` of sending each (so the accumulators, merged as tasks
    finish, show progress, and a retry resends little). Files: Spark's split."""
    slots = max(1, default_parallelism)
    if options.partitions is not None:
        return options.partitions
    if options.events is None:
        return slots
    per_task = float(EVENTS_PER_TASK)
    if options.rate_per_second is not None:
        per_task = max(1.0, options.rate_per_second / slots * PACED_TASK_SECONDS)
    wanted = max(slots, math.ceil(options.events / per_task))
    return max(1, min(options.events, wanted, MAX_PARTITIONS))


def task_rate(options: RunOptions, partitions: int, default_parallelism: int) -> float | None:
    """Send rate of one task: the overall rate shared by the tasks that run at once."""
    if options.rate_per_second is None:
        return None
    return options.rate_per_second / max(1, min(partitions, default_parallelism))


def events_rdd(sc: SparkContext, options: RunOptions, partitions: int) -> RDD[dict[str, Any]]:
    """The run's events, enriched, in `partitions` partitions (files: at least that many)."""
    if options.input_path is None:
        seqs = sc.range(0, options.events or 0, numSlices=partitions)
        return seqs.map(functools.partial(generated_event, options.run_id))
    lines = sc.textFile(options.input_path, minPartitions=partitions)
    if options.input_format == "csv":
        try:
            header = lines.filter(functools.partial(_data_line, None)).first()
        except ValueError:
            raise UsageError(f"--input {options.input_path} holds no records") from None
        columns = csv_header(header)
        data = lines.filter(functools.partial(_data_line, header))
        return data.zipWithIndex().map(functools.partial(_csv_event, columns, options.run_id))
    data = lines.filter(functools.partial(_data_line, None))
    return data.zipWithIndex().map(functools.partial(_json_event, options.run_id))


def task_counts(sc: SparkContext, group: str) -> TaskCounts:
    """Tasks of every stage of the run's job group, from Spark's status tracker."""
    tracker = sc.statusTracker()
    total = done = running = failed = 0
    for job_id in tracker.getJobIdsForGroup(group):
        job = tracker.getJobInfo(job_id)
        for stage_id in job.stageIds if job is not None else ():
            stage = tracker.getStageInfo(stage_id)
            if stage is not None:
                total += stage.numTasks
                done += stage.numCompletedTasks
                running += stage.numActiveTasks
                failed += stage.numFailedTasks
    return TaskCounts(total=total, done=done, running=running, failed_attempts=failed)


def reporting(
    line: Callable[[], str], options: RunOptions, progress: IO[str] | None
) -> AbstractContextManager[Any]:
    """`line()` to `progress` every `--progress-seconds` while in the block (None: none)."""
    if progress is None:
        return nullcontext()
    return ProgressReporter(line, options.progress_seconds, progress)


@dataclass
class JobRun:
    """One batch job of the run (either sink): its job group, accumulators, progress
    lines and summary. `start` names the job group after the run and gives tasks the
    application id through a local property (telemetry identity; Spark sets it only as
    the SPARK_APPLICATION_ID env of Kubernetes executors)."""

    sc: SparkContext
    options: RunOptions
    accumulators: JobAccumulators
    expected: int | None
    started: float = field(default_factory=time.monotonic)

    @classmethod
    def start(cls, sc: SparkContext, options: RunOptions) -> JobRun:
        sc.setJobGroup(options.run_id, f"hangwatch pipeline {options.run_id} -> {options.topic}")
        sc.setLocalProperty(APP_ID_PROPERTY, sc.applicationId)
        expected = options.events if options.input_path is None else None
        return cls(sc, options, JobAccumulators.create(sc), expected)

    def line(self) -> str:
        """The progress line now."""
        try:
            counts = task_counts(self.sc, self.options.run_id)
        except (PySparkException, Py4JError) as exc:  # Spark shutting down under us
            return f"[pipeline] progress unavailable: {type(exc).__name__}"
        elapsed = time.monotonic() - self.started
        return progress_line(elapsed, counts, self.accumulators.tallies(), self.expected)

    def reporting(self, progress: IO[str] | None) -> AbstractContextManager[Any]:
        """Progress lines to `progress` every `--progress-seconds` while in the block."""
        return reporting(self.line, self.options, progress)

    def summary(self, partitions: int, error: str | None) -> Summary:
        """The run's summary once the job is over (`error`: why it failed, or None)."""
        duration = time.monotonic() - self.started
        counts = task_counts(self.sc, self.options.run_id)
        tallies = self.accumulators.tallies()
        return Summary(
            run_id=self.options.run_id,
            topic=self.options.topic,
            master=self.sc.master or self.options.master or "-",
            application_id=self.sc.applicationId,
            expected=self.expected,
            partitions=partitions,
            tallies=tallies,
            failed_attempts=max(counts.failed_attempts, tallies.earlier_attempts),
            duration_seconds=duration,
            error=error,
        )
