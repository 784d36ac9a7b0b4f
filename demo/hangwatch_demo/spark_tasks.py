"""Runs in the demo's Spark executors: the reference pipeline's task, through hangwatch's wrapper
or a plain client, wedgeable for S4.

`write_partition` is `hangwatch_pipeline.job.write_partition` with one addition: the
client's (librdkafka's) log lines go to a Python logger whose handler blocks forever
once a file named `wedge` exists in the executor's working directory. confluent-kafka
runs a `logger` on the producer's poll thread, so creating that file in one
executor's directory blocks that executor's I/O thread — the structure of seed S4
(there, user code in a delivery callback made a blocking call). The wrapper runs the
job's own callbacks on a separate thread, so a logger is the one way left for user
code to block the I/O thread. Other executors, and the replacement executor (a new
working directory), are not affected.

`write_partition_plain` is the same task writing through a bare `confluent_kafka.Producer`
(`PlainProducer`: produce, `poll(0)` after each message, `flush` at the end; no wrapper,
no telemetry): a producer hangwatch did not instrument, which the sidecar judges from
its socket view and Spark's view. Its delivery callback blocks forever once the same
`wedge` file exists: confluent-kafka runs delivery callbacks inside `poll()` and
`flush()` on the task's own thread, so the task stops sending — seed S4 as it happened.
`write_partition_plain_cached` keeps one client per Python worker across tasks (as a
producer cached per executor is), so between runs it stays connected and idle with no
task running.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import itertools
import json
import logging
import math
import random
import socket
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from confluent_kafka import KafkaError, Message, Producer
from pyspark import TaskContext
from pyspark.sql import DataFrame, Row, SparkSession

from hangwatch_demo.spark_cluster import PipelineRun
from hangwatch_demo.workload import WedgeOnFile
from hangwatch_pipeline import connector_sink, job
from hangwatch_pipeline.run_options import SINK_CONNECTOR_STREAMING, RunOptions
from hangwatch_pipeline.run_report import Summary
from hangwatch_producer.ledger import Counters
from hangwatch_producer.producer import DeliveryFailed

CLIENT_LOGGER = "hangwatch_demo.client"
WEDGE_FILE = "wedge"
FLUSH_TIMEOUT_SECONDS = 30.0
"""A plain task's final flush, at least: past the producer's message timeout (plus
`FLUSH_MARGIN_SECONDS` when that is longer), so every message has its report (delivered
or failed) by then, unless the task's thread is wedged."""
FLUSH_MARGIN_SECONDS = 5.0
LIBRDKAFKA_MESSAGE_TIMEOUT_MS = 300_000
"""librdkafka's own `message.timeout.ms` (a plain client's, unless set)."""
QUEUE_FULL_POLL_SECONDS = 0.1

_cached: dict[str, Producer] = {}
"""`write_partition_plain_cached`'s client of this Python worker, by configuration."""


@functools.cache
def _wedge() -> WedgeOnFile:
    """The wedge switch of this Python worker: `wedge` in its executor's directory."""
    return WedgeOnFile(Path.cwd() / WEDGE_FILE)


def _client_logger() -> str:
    """The wedgeable client logger of this Python worker (set up once per process)."""
    logger = logging.getLogger(CLIENT_LOGGER)
    if _wedge() not in logger.handlers:
        logger.propagate = False  # the client's debug lines are a trigger, not output
        logger.setLevel(logging.DEBUG)
        logger.addHandler(_wedge())
    return CLIENT_LOGGER


def write_partition(
    plan: job.TaskPlan, accumulators: job.JobAccumulators, events: Iterable[dict[str, Any]]
) -> None:
    """The pipeline's task, its client logging through the wedgeable logger."""
    plan = dataclasses.replace(plan, client_logger=_client_logger())
    job.write_partition(plan, accumulators, events)


class PlainProducer:
    """A bare confluent-kafka client as `job.write_partition` uses a producer: `send` and
    `counters`; leaving the `with` block flushes and raises `DeliveryFailed` unless every
    message was acknowledged (so Spark runs the task again: nothing is lost)."""

    def __init__(self, client: Producer, conf: dict[str, Any]) -> None:
        self.client = client
        timeout_ms = int(conf.get("message.timeout.ms") or LIBRDKAFKA_MESSAGE_TIMEOUT_MS)
        self.flush_seconds = max(FLUSH_TIMEOUT_SECONDS, timeout_ms / 1000 + FLUSH_MARGIN_SECONDS)
        self.enqueued = self.delivered = self.failed = 0
        self.errors: list[str] = []

    def send(
        self, topic: str, value: str | bytes | None = None, key: str | bytes | None = None
    ) -> None:
        while True:
            try:
                self.client.produce(topic, value, key, on_delivery=self._on_delivery)
                break
            except BufferError:  # the local queue is full: serve reports, try again
                self.client.poll(QUEUE_FULL_POLL_SECONDS)
        self.enqueued += 1
        self.client.poll(0)  # delivery callbacks run here, on the task's thread

    def _on_delivery(self, err: KafkaError | None, msg: Message) -> None:
        _wedge().block_if_wedged()  # user code in a delivery callback that never returns
        if err is None:
            self.delivered += 1
        else:
            self.failed += 1
            if len(self.errors) < 10:
                # as a PySpark task prints it (`KafkaError{code=MSG_SIZE_TOO_LARGE,...}`):
                # the failed attempt's message names the code, as the wrapper's does
                self.errors.append(str(err))

    def counters(self) -> Counters:
        return Counters(self.enqueued, self.delivered, self.failed, len(self.client), 0)

    def settle(self) -> None:
        """Flush (bounded); raise `DeliveryFailed` unless every message was acknowledged."""
        self.client.flush(self.flush_seconds)
        counters = self.counters()
        if counters.delivered < counters.enqueued:
            raise DeliveryFailed("plain producer", counters, self.errors)


@contextmanager
def _plain(conf: dict[str, Any]) -> Iterator[PlainProducer]:
    """A new client for this task, closed at its end."""
    p = PlainProducer(Producer(conf), conf)
    try:
        yield p
        p.settle()
    finally:
        p.client.purge()
        p.client.flush(0)


@contextmanager
def _plain_cached(conf: dict[str, Any]) -> Iterator[PlainProducer]:
    """This Python worker's client for `conf`, kept open after the task (one at a time:
    a client of another configuration, e.g. a finished scenario's cluster, is dropped)."""
    key = json.dumps(conf, sort_keys=True, default=str)
    for other in [k for k in _cached if k != key]:
        _cached.pop(other).purge()
    if key not in _cached:
        _cached[key] = Producer(conf)
    p = PlainProducer(_cached[key], conf)
    yield p
    p.settle()


def write_partition_plain(
    plan: job.TaskPlan, accumulators: job.JobAccumulators, events: Iterable[dict[str, Any]]
) -> None:
    """The pipeline's task through a plain client of its own (see the module docstring)."""
    job.write_partition(plan, accumulators, events, _plain)


def write_partition_plain_cached(
    plan: job.TaskPlan, accumulators: job.JobAccumulators, events: Iterable[dict[str, Any]]
) -> None:
    """The pipeline's task through this Python worker's kept plain client."""
    job.write_partition(plan, accumulators, events, _plain_cached)


@dataclass(frozen=True)
class Pause:
    """Healthy work between writes: after every `every_events` events the task spends
    `seconds` computing (`compute`: a CPU-bound loop in user code, as a parse or a model
    call does) or waiting (`wait`: a blocking read of slow input) with no client call."""

    every_events: int
    seconds: float
    kind: str = "compute"
    max_seconds: float = 0.0
    """Above `seconds`: each pause lasts a random time between the two (seeded per task),
    and `kind` "mixed" alternates computing and waiting."""
    budget_seconds: float = 0.0
    """Above 0: a task pauses at most this long in all (the last pause is cut short), so
    a run of random pauses still ends about when planned."""

    def __post_init__(self) -> None:
        kinds = ("compute", "wait", "mixed")
        if self.kind not in kinds or self.every_events < 1 or self.seconds <= 0:
            raise ValueError(f"invalid pause {self}")

    @property
    def mean_seconds(self) -> float:
        return (self.seconds + max(self.seconds, self.max_seconds)) / 2

    def durations(self, seed: int) -> Iterator[tuple[str, float]]:
        """The pauses of one task: (kind, seconds), forever."""
        draw, left = random.Random(seed), self.budget_seconds or math.inf
        for n in itertools.count():
            kind = self.kind if self.kind != "mixed" else ("compute", "wait")[n % 2]
            longest = max(self.seconds, self.max_seconds)
            seconds = min(left, draw.uniform(self.seconds, longest))
            left -= seconds
            yield kind, seconds  # 0 once the budget is spent


def _compute(seconds: float) -> int:
    """Burn CPU in user code for `seconds` (hashing, as parsing or scoring would)."""
    end, digest, rounds = time.monotonic() + seconds, b"", 0
    while time.monotonic() < end:
        for _ in range(1000):
            digest = hashlib.sha256(digest).digest()
        rounds += 1
    return rounds


def _slow_input(seconds: float) -> None:
    """Block on input that is slow to come (a socket read with nothing to read)."""
    reader, writer = socket.socketpair()
    try:
        reader.settimeout(seconds)
        with suppress(TimeoutError):
            reader.recv(1)
    finally:
        reader.close()
        writer.close()


def _paused(events: Iterable[dict[str, Any]], pause: Pause, seed: int) -> Iterator[dict[str, Any]]:
    durations = pause.durations(seed)
    for n, event in enumerate(events, start=1):
        yield event
        if n % pause.every_events == 0:
            kind, seconds = next(durations)
            if seconds <= 0:
                continue
            if kind == "compute":
                _compute(seconds)
            else:
                _slow_input(seconds)


def _task_seed() -> int:
    ctx = TaskContext.get()
    return ctx.partitionId() * 1000 + ctx.attemptNumber() if ctx is not None else 0


def paused_upstream(pause: Pause) -> Callable[[Iterator[dict[str, Any]]], Iterator[dict[str, Any]]]:
    """A task's events with `pause`'s healthy work between them (user code upstream of a
    sink: in Spark's Kafka sink's task, a slow Python step before the JVM writes)."""
    return lambda events: _paused(events, pause, _task_seed())


def with_pauses(writer: job.PartitionWriter, pause: Pause) -> job.PartitionWriter:
    """`writer` whose task pauses for healthy work between writes (see `Pause`)."""

    def task(
        plan: job.TaskPlan, accumulators: job.JobAccumulators, events: Iterable[dict[str, Any]]
    ) -> None:
        writer(plan, accumulators, _paused(events, pause, _task_seed()))

    return task


def task_for(producer: str, pause: Pause | None) -> job.PartitionWriter:
    """The task a scenario runs: its producer's, with its pauses if any."""
    writer = TASKS[producer]
    return writer if pause is None else with_pauses(writer, pause)


JVM = "jvm"
"""`Scenario.producer` of Spark's own Kafka sink (the connector's JVM `KafkaProducer`)."""


def _seq_events(
    writer: job.PartitionWriter,
    plan: job.TaskPlan,
    accumulators: job.JobAccumulators,
    run_id: str,
    rows: Iterable[Row],
) -> None:
    writer(plan, accumulators, (job.generated_event(run_id, int(r.seq)) for r in rows))


def _foreach_batch(
    spark: SparkSession, options: RunOptions, writer: job.PartitionWriter
) -> Callable[[DataFrame, int], None]:
    """`foreachBatch`'s function: every micro-batch written by `writer`'s tasks, as a
    streaming job writes through its own producer (`foreachPartition` in `foreachBatch`)."""
    sc = spark.sparkContext
    conf = {"bootstrap.servers": options.bootstrap, **options.producer_conf}
    partitions = options.partitions or sc.defaultParallelism
    plan = job.TaskPlan(
        options.topic, conf, job.task_rate(options, partitions, sc.defaultParallelism)
    )
    accumulators = job.JobAccumulators.create(sc)
    write = functools.partial(_seq_events, writer, plan, accumulators, options.run_id)

    def each(frame: DataFrame, batch: int) -> None:
        # (a query's batches run on a thread of its own: the property tasks read is set here)
        sc.setLocalProperty(job.APP_ID_PROPERTY, sc.applicationId)
        frame.rdd.foreachPartition(write)

    return each


def pipeline_run(
    producer: str, pause: Pause | None, trigger_seconds: float = 0.0, rows_per_batch: int = 0
) -> PipelineRun:
    """A scenario's run: batch (`trigger_seconds` 0) or a streaming query whose
    micro-batches start every `trigger_seconds` (`rows_per_batch` each); written through
    `producer`'s tasks (`TASKS`) or Spark's Kafka sink (`JVM`: `options.sink` says which
    mode), with `pause`'s healthy work in each task between writes."""
    trigger = trigger_seconds or None
    per_batch = rows_per_batch or connector_sink.EVENTS_PER_MICRO_BATCH

    def run(spark: SparkSession, options: RunOptions, progress: IO[str]) -> Summary:
        if producer == JVM and options.sink == SINK_CONNECTOR_STREAMING:
            return connector_sink.run_streaming(
                spark, options, progress, trigger_seconds=trigger, rows_per_batch=per_batch
            )
        if producer == JVM:
            upstream = paused_upstream(pause) if pause is not None else None
            return connector_sink.run_batch(spark, options, progress, upstream=upstream)
        task = task_for(producer, pause)
        if trigger is None:
            return job.run_pipeline(spark, options, progress, task)
        each = _foreach_batch(spark, options, task)
        return connector_sink.run_streaming(
            spark,
            options,
            progress,
            trigger_seconds=trigger,
            rows_per_batch=per_batch,
            each_batch=each,
        )

    return run


TASKS: dict[str, job.PartitionWriter] = {
    "wrapper": write_partition,
    "plain": write_partition_plain,
    "plain-cached": write_partition_plain_cached,
}
"""The task each `Scenario.producer` runs."""
