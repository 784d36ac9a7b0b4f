"""The wrapper's sink: every task writes its partition through `hangwatch_producer.producer`.

Leaving the producer's `with` block raises `DeliveryFailed` unless every message of the
task was acknowledged, so the task fails and Spark runs it again
(`spark.task.maxFailures`, or F in `local[N,F]`): at-least-once, duplicates possible,
nothing lost. Tasks that succeed add what they sent and got acknowledged to the run's
accumulators (`workload.JobAccumulators`).
"""

from __future__ import annotations

import functools
import logging
import os
import sys
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import IO, Any, Protocol

from py4j.protocol import Py4JError  # type: ignore[import-untyped]
from pyspark import TaskContext
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession

from hangwatch import logs
from hangwatch.errors import UsageError
from hangwatch_pipeline.events import Pacer, to_message
from hangwatch_pipeline.run_options import RunOptions, expand_environment
from hangwatch_pipeline.run_report import (
    Summary,
    failure_reason,
)
from hangwatch_pipeline.workload import (
    JobAccumulators,
    JobRun,
    events_rdd,
    partition_count,
    task_rate,
)
from hangwatch_producer.ledger import Counters
from hangwatch_producer.producer import ProducerError, producer

_worker_logging = False


@dataclass(frozen=True)
class TaskPlan:
    """What every task needs: where to write, the producer's configuration, its pace."""

    topic: str
    producer_conf: dict[str, str]
    rate_per_task: float | None = None
    client_logger: str | None = None
    """Name of a Python logger given to the client (librdkafka's log lines become records
    of it, emitted on the producer's poll thread); None leaves them on stderr."""


def _configure_worker_logging() -> None:
    """The wrapper's log lines as JSON on the worker's stderr (once per Python worker):
    warnings by default, HANGWATCH_LOG_LEVEL (e.g. INFO) when the executor sets it."""
    global _worker_logging  # noqa: PLW0603 - once per worker process
    if not _worker_logging:
        logs.configure("pipeline", os.environ.get("HANGWATCH_LOG_LEVEL") or "WARNING")
        _worker_logging = True


class TaskProducer(Protocol):
    """What a task needs of its producer (`hangwatch_producer.producer`'s, by default)."""

    def send(
        self, topic: str, value: str | bytes | None = None, key: str | bytes | None = None
    ) -> None: ...

    def counters(self) -> Counters: ...


ProducerOpener = Callable[[dict[str, Any]], AbstractContextManager[TaskProducer]]
"""Opens a task's producer from its configuration; leaving the `with` block must raise
unless every message was acknowledged."""


def write_partition(
    plan: TaskPlan,
    accumulators: JobAccumulators,
    events: Iterable[dict[str, Any]],
    open_producer: ProducerOpener = producer,
) -> None:
    """The task: send every event of the partition; raise unless all were acknowledged.
    `open_producer`: the wrapper by default (`hangwatch demo` also writes through a plain
    client, to replay incidents of producers hangwatch did not instrument)."""
    _configure_worker_logging()
    ctx = TaskContext.get()
    attempt = ctx.attemptNumber() if ctx is not None else 0
    pacer = Pacer(plan.rate_per_task) if plan.rate_per_task else None
    conf: dict[str, Any] = expand_environment(plan.producer_conf, os.environ)
    if plan.client_logger is not None:
        conf["logger"] = logging.getLogger(plan.client_logger)
    try:
        with open_producer(conf) as p:
            for event in events:
                key, value = to_message(event)
                p.send(plan.topic, value, key=key)
                if pacer is not None:
                    pacer.tick()
    except (ProducerError, UsageError) as exc:
        where = f"task {ctx.partitionId()} attempt {attempt}" if ctx is not None else "task"
        print(f"hangwatch pipeline: {where} failed: {exc}", file=sys.stderr, flush=True)
        raise
    counters = p.counters()
    accumulators.record(counters.enqueued, counters.delivered, attempt)


PartitionWriter = Callable[[TaskPlan, JobAccumulators, Iterable[dict[str, Any]]], None]
"""What each task runs on its partition: `write_partition`, or a function wrapping it
(it must be importable on the executors, i.e. defined in an installed module)."""


def run_wrapper(
    spark: SparkSession,
    options: RunOptions,
    progress: IO[str] | None = None,
    task: PartitionWriter = write_partition,
) -> Summary:
    """The wrapper's sink: each task writes its partition through the producer wrapper
    (`task`: `write_partition`, or a function wrapping it, as `hangwatch demo` does to
    replay seed S4); progress lines to `progress` (None: silent). A job that fails (a
    task used up its attempts) is reported in the summary's `error`."""
    sc = spark.sparkContext
    partitions = partition_count(options, sc.defaultParallelism)
    rate = task_rate(options, partitions, sc.defaultParallelism)
    conf = {"bootstrap.servers": options.bootstrap, **options.producer_conf}
    plan = TaskPlan(options.topic, conf, rate)
    run = JobRun.start(sc, options)
    error: str | None = None
    with run.reporting(progress):
        try:
            rdd = events_rdd(sc, options, partitions)
            partitions = rdd.getNumPartitions()  # files: Spark's split decides
            rdd.foreachPartition(functools.partial(task, plan, run.accumulators))
        except (PySparkException, Py4JError) as exc:
            error = failure_reason(exc)
    return run.summary(partitions, error)
