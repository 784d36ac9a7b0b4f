"""The pipeline on Spark's own Kafka sink: `--sink connector` and `--sink connector-streaming`.

No hangwatch code runs where the messages are produced: the tasks hand rows to the
`spark-sql-kafka-0-10` data source, whose JVM `KafkaProducer` (one cached per
executor and option set) sends them. What the user sets with `--option kafka.*` goes
to that producer unchanged (`kafka.acks`, `kafka.delivery.timeout.ms`,
`kafka.max.block.ms`, `kafka.enable.idempotence`, ...).

- `connector` (batch): the events (generated or read, as the wrapper mode makes them)
  become a DataFrame of `key`, `value` bytes written by `df.write.format("kafka")`.
  A task succeeds only once the connector flushed its producer and found no failed
  send, so the rows counted by *succeeded* tasks (Spark merges accumulators of
  succeeded tasks only) are the rows the cluster acknowledged; a failed task is run
  again by Spark and resends its partition (at-least-once, duplicates possible).
- `connector-streaming`: a Structured Streaming query, `rate-micro-batch` source (batch
  b holds seqs b*R .. b*R+R-1, the same after a restart), events made by a Python UDF,
  `writeStream.format("kafka")` with a checkpoint. The driver stops the query once the
  micro-batch holding the last seq is committed. Run again with the same `--run-id`
  and `--checkpoint`, the query resumes after its last committed micro-batch (the
  uncommitted one is written again: duplicates possible, nothing lost). Events
  acknowledged = the rows of the micro-batches this run committed (the checkpoint's
  `commits/` log: Spark commits a batch only after its tasks succeeded).
"""

from __future__ import annotations

import contextlib
import functools
import math
import re
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import IO, Any

from py4j.protocol import Py4JError  # type: ignore[import-untyped]
from pyspark import TaskContext
from pyspark.errors import PySparkException
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming.query import StreamingQuery
from pyspark.sql.types import BinaryType, StructField, StructType

from hangwatch_pipeline.events import Pacer, to_message
from hangwatch_pipeline.run_options import SINK_CONNECTOR_STREAMING, RunOptions
from hangwatch_pipeline.run_report import (
    Summary,
    Tallies,
    TaskCounts,
    failure_reason,
    progress_line,
)
from hangwatch_pipeline.workload import (
    APP_ID_PROPERTY,
    EVENTS_PER_TASK,
    JobAccumulators,
    JobRun,
    events_rdd,
    generated_event,
    partition_count,
    reporting,
    task_counts,
    task_rate,
)

MESSAGE = StructType([StructField("key", BinaryType()), StructField("value", BinaryType())])
"""The rows the Kafka data source writes (its `topic` comes from the `topic` option)."""
EVENTS_PER_MICRO_BATCH = 20_000
"""Rows of one micro-batch of the streaming mode (the last one may hold fewer events)."""
STOP_POLL_SECONDS = 1
"""How often the driver looks for the last micro-batch's commit (awaitTermination's unit)."""
_KAFKA_ERROR = re.compile(r"(org\.apache\.kafka\.[\w.]+(?:Exception|Error)): (.+)")


def connector_failure_reason(exc: BaseException) -> str:
    """Why a connector job failed: the Kafka client's own exception line when there is
    one (a timeout, an authorisation error), else `failure_reason`'s."""
    for line in str(exc).splitlines():
        match = _KAFKA_ERROR.search(line)
        if match:
            return f"{match.group(1).rsplit('.', 1)[-1]}: {match.group(2).strip()}"
    return failure_reason(exc)


def _writer_options(options: RunOptions) -> dict[str, str]:
    return {
        **options.sink_options,
        "kafka.bootstrap.servers": options.bootstrap,
        "topic": options.topic,
    }


Upstream = Callable[[Iterator[dict[str, Any]]], Iterator[dict[str, Any]]]
"""User code between a task's events and the sink, run in the task's Python worker (the
demo's silence controls compute or wait there, as a slow UDF upstream of the sink does)."""


def _messages(
    rate: float | None,
    accumulators: JobAccumulators,
    upstream: Upstream | None,
    events: Iterable[dict[str, Any]],
) -> Iterator[tuple[bytes, bytes]]:
    """A task's rows; counted once the partition was handed over (merged on success)."""
    ctx = TaskContext.get()
    pacer = Pacer(rate) if rate else None
    count = 0
    source = iter(events)
    for event in upstream(source) if upstream is not None else source:
        yield to_message(event)
        count += 1
        if pacer is not None:
            pacer.tick()
    accumulators.record(count, count, ctx.attemptNumber() if ctx is not None else 0)


def run_connector(
    spark: SparkSession,
    options: RunOptions,
    progress: IO[str] | None = None,
    *,
    upstream: Upstream | None = None,
    trigger_seconds: float | None = None,
    rows_per_batch: int = EVENTS_PER_MICRO_BATCH,
) -> Summary:
    """Dispatch on `options.sink` (both connector modes); `upstream` is the batch mode's,
    `trigger_seconds` and `rows_per_batch` the streaming mode's (see there)."""
    if options.sink == SINK_CONNECTOR_STREAMING:
        return run_streaming(
            spark, options, progress, trigger_seconds=trigger_seconds, rows_per_batch=rows_per_batch
        )
    return run_batch(spark, options, progress, upstream=upstream)


def run_batch(
    spark: SparkSession,
    options: RunOptions,
    progress: IO[str] | None = None,
    *,
    upstream: Upstream | None = None,
) -> Summary:
    """`df.write.format("kafka")` of the run's events (see the module docstring), each
    task's events passing through `upstream` first when given."""
    sc = spark.sparkContext
    partitions = partition_count(options, sc.defaultParallelism)
    rate = task_rate(options, partitions, sc.defaultParallelism)
    run = JobRun.start(sc, options)
    error: str | None = None
    with run.reporting(progress):
        try:
            rdd = events_rdd(sc, options, partitions)
            partitions = rdd.getNumPartitions()
            rows = rdd.mapPartitions(functools.partial(_messages, rate, run.accumulators, upstream))
            frame = spark.createDataFrame(rows, MESSAGE, verifySchema=False)
            frame.write.format("kafka").options(**_writer_options(options)).save()
        except (PySparkException, Py4JError) as exc:
            error = connector_failure_reason(exc)
    return run.summary(partitions, error)


def checkpoint_dir(options: RunOptions) -> Path:
    """The streaming query's checkpoint: `--checkpoint`, else one per run id."""
    if options.checkpoint:
        return Path(options.checkpoint)
    return Path(tempfile.gettempdir()) / "hangwatch-pipeline" / options.run_id / "checkpoint"


def committed_batches(checkpoint: Path) -> set[int]:
    """Micro-batches the query committed (the names in the checkpoint's `commits/`)."""
    commits = checkpoint / "commits"
    if not commits.is_dir():
        return set()
    return {int(p.name) for p in commits.iterdir() if p.name.isdigit()}


def batch_rows(batch: int, per_batch: int, events: int) -> int:
    """Events of micro-batch `batch`: seqs batch*per_batch .. (capped at `events`)."""
    return max(0, min(events, (batch + 1) * per_batch) - batch * per_batch)


def micro_batches(events: int, most: int = EVENTS_PER_MICRO_BATCH) -> tuple[int, int]:
    """(rows per micro-batch, micro-batches) for `events` events, at most `most` a batch."""
    batches = max(1, math.ceil(events / most))
    per_batch = math.ceil(events / batches)
    return per_batch, batches


def generated_message(run_id: str, seq: int) -> tuple[bytes, bytes]:
    """(key, value) of event `seq` of a generated run (the streaming mode's UDF)."""
    return to_message(generated_event(run_id, seq))


def _message_column(run_id: str) -> Column:
    # a plain Python UDF (no Arrow: pandas is not a dependency), evaluated once per row
    make = F.udf(functools.partial(generated_message, run_id), MESSAGE, useArrow=False)
    return make.asNondeterministic()(F.col("value"))


def query_name(options: RunOptions) -> str:
    """The streaming query's name (one per run id)."""
    return f"hangwatch-{options.run_id}"


def _seqs(spark: SparkSession, options: RunOptions, per_batch: int, partitions: int) -> DataFrame:
    """The run's seqs (`value`), `per_batch` a micro-batch, in `partitions` partitions."""
    source = (
        spark.readStream.format("rate-micro-batch")
        .option("rowsPerBatch", per_batch)
        .option("numPartitions", partitions)
        .load()
    )
    return source.where(F.col("value") < (options.events or 0))


def _stream(spark: SparkSession, options: RunOptions, per_batch: int, partitions: int) -> DataFrame:
    rows = _seqs(spark, options, per_batch, partitions)
    return rows.select(_message_column(options.run_id).alias("m")).select("m.key", "m.value")


def run_streaming(
    spark: SparkSession,
    options: RunOptions,
    progress: IO[str] | None = None,
    *,
    trigger_seconds: float | None = None,
    rows_per_batch: int = EVENTS_PER_MICRO_BATCH,
    each_batch: Callable[[DataFrame, int], None] | None = None,
) -> Summary:
    """A streaming query writing the run's events with `writeStream.format("kafka")`,
    stopped once the micro-batch holding the last seq is committed. `trigger_seconds`:
    a micro-batch starts at most every that many seconds (a processing-time trigger; the
    query idles in between), else as soon as the previous one ended. `each_batch`: the
    micro-batches (a `seq` column) go to it (`foreachBatch`, a producer of the user's in
    its tasks) instead of the Kafka sink; Spark commits a batch once it returned."""
    sc = spark.sparkContext
    events = options.events or 0
    per_batch, batches = micro_batches(events, rows_per_batch)
    partitions = options.partitions or max(
        sc.defaultParallelism, min(per_batch // EVENTS_PER_TASK + 1, 64)
    )
    checkpoint = checkpoint_dir(options)
    before = committed_batches(checkpoint)
    sc.setLocalProperty(APP_ID_PROPERTY, sc.applicationId)
    started = time.monotonic()
    query: StreamingQuery | None = None

    def tallies() -> Tallies:
        now = committed_batches(checkpoint) - before
        rows = sum(batch_rows(b, per_batch, events) for b in now)
        return Tallies(sent=rows, acknowledged=rows, tasks=0)

    def line() -> str:
        counts = TaskCounts()
        with contextlib.suppress(PySparkException, Py4JError):
            if query is not None:
                counts = task_counts(sc, str(query.runId))
        return progress_line(time.monotonic() - started, counts, tallies(), events)

    error: str | None = None
    with reporting(line, options, progress):
        try:
            if each_batch is None:
                sink = (
                    _stream(spark, options, per_batch, partitions)
                    .writeStream.format("kafka")
                    .options(**_writer_options(options))
                )
            else:
                seqs = _seqs(spark, options, per_batch, partitions).withColumnRenamed(
                    "value", "seq"
                )
                sink = seqs.select("seq").writeStream.foreachBatch(each_batch)
            writer = sink.option("checkpointLocation", str(checkpoint)).queryName(
                query_name(options)
            )
            if trigger_seconds:
                writer = writer.trigger(processingTime=f"{trigger_seconds:g} seconds")
            query = writer.start()
            while query.isActive:
                if max(committed_batches(checkpoint), default=-1) >= batches - 1:
                    query.stop()
                    break
                query.awaitTermination(STOP_POLL_SECONDS)
            failure = query.exception()
            if failure is not None:
                error = connector_failure_reason(failure)
        except (PySparkException, Py4JError) as exc:
            error = connector_failure_reason(exc)
    counts = TaskCounts()
    with contextlib.suppress(PySparkException, Py4JError):
        if query is not None:
            counts = task_counts(sc, str(query.runId))
    done = tallies()
    # A run resuming a query sends what the earlier runs' committed batches did not hold.
    expected = events - sum(batch_rows(b, per_batch, events) for b in before)
    return Summary(
        run_id=options.run_id,
        topic=options.topic,
        master=sc.master or options.master or "-",
        application_id=sc.applicationId,
        expected=expected,
        partitions=max(partitions, counts.total),
        tallies=Tallies(
            sent=done.sent, acknowledged=done.acknowledged, tasks=counts.done, retried_tasks=0
        ),
        failed_attempts=counts.failed_attempts,
        duration_seconds=time.monotonic() - started,
        error=error,
    )
