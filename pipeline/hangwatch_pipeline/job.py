"""The reference PySpark pipeline: generate (or read) events, enrich them, write them to Kafka.

Run by `hangwatch pipeline run` (local and local-cluster masters, see `pipeline_cli`)
or on a cluster by spark-submit, this file being the application:

    spark-submit --master k8s://https://api:6443 --deploy-mode cluster ... \\
        local:///opt/hangwatch/job.py --bootstrap kafka-0:9092 --topic events --events 1000000

Data flow: `sc.range` (or `sc.textFile` + `zipWithIndex`) -> `events.generate_event` /
`parse_*` -> `events.enrich` -> `foreachPartition(write_partition)`. Each task writes
its partition through `hangwatch_producer.producer`; leaving the `with` block raises
`DeliveryFailed` unless every message of the task was acknowledged, so the task fails
and Spark runs it again (`spark.task.maxFailures`, or F in `local[N,F]`). A retry
sends the whole partition again: at-least-once, duplicates possible, nothing lost,
which `hangwatch pipeline verify` checks. Accumulators count what succeeded tasks
sent and got acknowledged; the status tracker counts failed attempts (`run_report`).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import logging
import math
import os
import sys
import time
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import IO, Any, Protocol

from py4j.protocol import Py4JError  # type: ignore[import-untyped]
from pyspark import RDD, SparkContext, TaskContext
from pyspark.accumulators import Accumulator
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession

from hangwatch import logs
from hangwatch.contracts import ExitCode
from hangwatch.errors import HangwatchError, UsageError
from hangwatch_pipeline import spark_kafka
from hangwatch_pipeline.events import (
    Pacer,
    csv_header,
    enrich,
    generate_event,
    parse_csv_line,
    parse_json_line,
    to_message,
)
from hangwatch_pipeline.run_options import (
    SINK_WRAPPER,
    RunOptions,
    add_run_arguments,
    expand_environment,
    run_options,
)
from hangwatch_pipeline.run_report import (
    ProgressReporter,
    Summary,
    Tallies,
    TaskCounts,
    failure_reason,
    progress_line,
)
from hangwatch_producer.ledger import Counters
from hangwatch_producer.producer import ProducerError, producer
from hangwatch_producer.settings import TELEMETRY_DIR_ENV

EVENTS_PER_TASK = 25_000
"""Target size of a task when the partition count is chosen: small enough that a
retried task resends little, large enough that producer start-up is noise."""

PACED_TASK_SECONDS = 5.0
"""Target duration of a task in a paced run (`--rate`)."""

MAX_PARTITIONS = 10_000

APP_ID_PROPERTY = "spark.app.id"
"""Local property the producer wrapper reads for the telemetry `application_id`."""

_worker_logging = False

QUIETED_LOGGERS = (
    "org.apache.spark.executor.Executor",
    "org.apache.spark.scheduler.TaskSetManager",
)
"""Spark loggers that print a whole Python traceback per failed task attempt; the task
itself prints one line saying why (`write_partition`)."""


@dataclass(frozen=True)
class TaskPlan:
    """What every task needs: where to write, the producer's configuration, its pace."""

    topic: str
    producer_conf: dict[str, str]
    rate_per_task: float | None = None
    client_logger: str | None = None
    """Name of a Python logger given to the client (librdkafka's log lines become records
    of it, emitted on the producer's poll thread); None leaves them on stderr."""


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


def run_pipeline(
    spark: SparkSession,
    options: RunOptions,
    progress: IO[str] | None = None,
    task: PartitionWriter = write_partition,
) -> Summary:
    """Run the job on `spark`; progress lines to `progress` (None: silent). A job that
    fails (a task used up its attempts) is reported in the summary's `error`. `task`
    writes each partition (`hangwatch demo` wraps `write_partition` to replay seed S4).
    The connector sinks run `connector_sink`'s job instead (no `task` of hangwatch's)."""
    if options.sink != SINK_WRAPPER:
        from hangwatch_pipeline.connector_sink import run_connector  # noqa: PLC0415 - it imports this module

        return run_connector(spark, options, progress)
    sc = spark.sparkContext
    partitions = partition_count(options, sc.defaultParallelism)
    accumulators = JobAccumulators.create(sc)
    rate = task_rate(options, partitions, sc.defaultParallelism)
    conf = {"bootstrap.servers": options.bootstrap, **options.producer_conf}
    plan = TaskPlan(options.topic, conf, rate)
    expected = options.events if options.input_path is None else None
    sc.setJobGroup(options.run_id, f"hangwatch pipeline {options.run_id} -> {options.topic}")
    # Tasks see the application id through this local property (telemetry identity);
    # Spark sets it only as the SPARK_APPLICATION_ID env of Kubernetes executors.
    sc.setLocalProperty(APP_ID_PROPERTY, sc.applicationId)
    started = time.monotonic()

    def line() -> str:
        try:
            counts = task_counts(sc, options.run_id)
        except (PySparkException, Py4JError) as exc:  # Spark shutting down under us
            return f"[pipeline] progress unavailable: {type(exc).__name__}"
        return progress_line(time.monotonic() - started, counts, accumulators.tallies(), expected)

    error: str | None = None
    reporting = (
        ProgressReporter(line, options.progress_seconds, progress)
        if progress is not None
        else contextlib.nullcontext()
    )
    with reporting:
        try:
            rdd = events_rdd(sc, options, partitions)
            partitions = rdd.getNumPartitions()  # files: Spark's split decides
            rdd.foreachPartition(functools.partial(task, plan, accumulators))
        except (PySparkException, Py4JError) as exc:
            error = failure_reason(exc)
    duration = time.monotonic() - started
    counts = task_counts(sc, options.run_id)
    tallies = accumulators.tallies()
    return Summary(
        run_id=options.run_id,
        topic=options.topic,
        master=sc.master or options.master or "-",
        application_id=sc.applicationId,
        expected=expected,
        partitions=partitions,
        tallies=tallies,
        failed_attempts=max(counts.failed_attempts, tallies.earlier_attempts),
        duration_seconds=duration,
        error=error,
    )


def session_conf(options: RunOptions) -> dict[str, str]:
    """Spark properties of the run's session (the user's `--conf` win)."""
    # Progress comes from the status store: write task starts to it at once (the
    # default batches them per 100 ms, which can hide a started task for seconds).
    conf = {"spark.ui.showConsoleProgress": "false", "spark.ui.liveUpdate.period": "0"}
    if options.master is not None and options.master.startswith("local"):
        conf["spark.ui.enabled"] = "false"
        conf["spark.pyspark.python"] = os.environ.get("PYSPARK_PYTHON") or sys.executable
    if options.telemetry_dir is not None:
        conf[f"spark.executorEnv.{TELEMETRY_DIR_ENV}"] = options.telemetry_dir
    # The connector's jars, checked (pyspark, Java, the cache) before any JVM starts,
    # when hangwatch starts the session; under spark-submit (no master of ours) they come
    # with spark-submit's --jars or the image, at the cluster's Spark version.
    ours = spark_kafka.prerequisites() if _loads_connector(options) else {}
    conf.update(ours)
    conf.update(options.spark_conf)
    if ours and "spark.jars" in options.spark_conf:
        conf["spark.jars"] = f"{ours['spark.jars']},{options.spark_conf['spark.jars']}"
    return conf


def _loads_connector(options: RunOptions) -> bool:
    return options.sink != SINK_WRAPPER and options.master is not None


def spark_session(options: RunOptions) -> SparkSession:
    """A session for the run: `options.master`, or the one spark-submit configured.
    Under spark-submit the application keeps the name it was submitted with (`--name`):
    on Kubernetes the executors' `spark-app-name` label comes from it, and that is what
    a ProducerHealthPolicy's selector matches (examples/policy-spark-executors.yaml)."""
    conf = session_conf(options)
    if "spark.pyspark.python" in conf:
        os.environ.setdefault("PYSPARK_PYTHON", conf["spark.pyspark.python"])
    builder = SparkSession.builder
    if options.master is not None:
        builder = builder.master(options.master).appName(options.app_name)
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(options.spark_log_level)
    return spark


def quiet_task_failure_logs(spark: SparkSession) -> None:
    """Silence Spark's per-attempt tracebacks (`QUIETED_LOGGERS`) in local runs."""
    jvm = spark.sparkContext._jvm
    if jvm is None:
        return
    level = jvm.org.apache.logging.log4j.Level.toLevel("OFF")
    for name in QUIETED_LOGGERS:
        jvm.org.apache.logging.log4j.core.config.Configurator.setLevel(name, level)


def execute(
    options: RunOptions,
    *,
    json_output: bool = False,
    quiet: bool = False,
    progress: IO[str] | None = sys.stderr,
) -> int:
    """Start a session, run, print the summary on stdout; exit code 0 only if all acknowledged.
    Progress lines go to `progress` (None: none)."""
    spark = spark_session(options)
    try:
        if quiet and options.spark_log_level not in {"ALL", "TRACE", "DEBUG", "INFO"}:
            quiet_task_failure_logs(spark)
        summary = run_pipeline(spark, options, progress)
    finally:
        spark.stop()
    if json_output:
        print(json.dumps(summary.as_json(), indent=2))
    else:
        print(summary.render())
    return ExitCode.OK if summary.ok else ExitCode.DEGRADED


def main(argv: list[str] | None = None) -> int:
    """spark-submit's entry: `job.py --bootstrap B --topic T [--events N | ...]`."""
    parser = argparse.ArgumentParser(
        prog="job.py", description="hangwatch reference pipeline (master from spark-submit)"
    )
    add_run_arguments(parser, with_master=False)
    args = parser.parse_args(argv)
    try:
        # spark-submit merges the Python driver's stderr into its stdout: with --json the
        # summary must be all of stdout, so the progress lines stay off.
        progress = None if args.json else sys.stderr
        return execute(run_options(args), json_output=args.json, progress=progress)
    except HangwatchError as exc:
        print(f"job.py: error: {exc}", file=sys.stderr)
        return exc.exit_code


if __name__ == "__main__":
    # Run the installed module's main so that tasks unpickle functions by reference.
    from hangwatch_pipeline.job import main as installed_main

    sys.exit(installed_main())
