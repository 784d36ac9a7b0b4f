"""The pipeline on Spark's own Kafka sink, against real Apache Kafka (engine: kafka).

Engine: the lab's real Apache Kafka engine (3 KRaft brokers). Not the mock: the
connector's Java producer (kafka-clients 3.9) asks the librdkafka mock cluster for
ApiVersions v4, the mock answers UNSUPPORTED_VERSION in a body the Java client reads
as a throttle of ~20 minutes, and no metadata request is ever sent (seen here:
`Topic ... not present in metadata after ...`), so the mock cannot stage this path.

Covered, with pyspark `local[2,4]` whose session loads the connector's cached jars
(`spark.jars`):
- batch, `df.write.format("kafka")` with the user's producer options (acks=all,
  idempotence, delivery and max-block timeouts): every event acknowledged by
  succeeded tasks, each read back exactly once when no task attempt failed. Spark's
  sink is at least once: a task attempt that failed (seen once in CI, on a host whose
  suite ran 1.35 times as long as usual) is run again, writing its partition again. So
  when an attempt failed, what it failed with is read from the driver and must be no
  refusal of the cluster's (the one error table: what a retry meets again), nothing
  may be missing, and no more duplicates than the failed attempts' partitions hold;
  the errors are shown as a warning;
- the user's `kafka.max.block.ms` reaches the JVM producer: with every broker frozen
  (TCP accepted, nothing answered) metadata never comes, `send` gives up after exactly
  that many ms, every attempt fails and the summary says so in one line naming the
  value, instead of claiming success;
- streaming, `writeStream.format("kafka")` with a checkpoint: every event delivered
  over several micro-batches; then the last micro-batch's commit is removed (a driver
  that died after the batch was written, before it was committed) and the same run is
  started again: the query resumes from its checkpoint, writes that micro-batch again
  and nothing else, and `verify` finds 0 missing and exactly that batch's events as
  duplicates.
"""

from __future__ import annotations

import math
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from hangwatch.kafka_errors import Restart, classify_message
from hangwatch_lab import Lab
from hangwatch_pipeline import spark_kafka
from hangwatch_pipeline.connector_sink import (
    EVENTS_PER_MICRO_BATCH,
    batch_rows,
    committed_batches,
    micro_batches,
)
from hangwatch_pipeline.job import run_pipeline, session_conf
from hangwatch_pipeline.run_options import (
    SINK_CONNECTOR,
    SINK_CONNECTOR_STREAMING,
    RunOptions,
    new_run_id,
)
from hangwatch_pipeline.verify import verify
from hangwatch_testing.spark_driver import stop_spark

from .helpers import MASTER, failed_attempt_errors

TOPICS = {"batch": 3, "blocked": 3, "streaming": 3}
USER_OPTIONS = {
    "kafka.acks": "all",
    "kafka.enable.idempotence": "true",
    "kafka.delivery.timeout.ms": "30000",
    "kafka.max.block.ms": "10000",
}


@pytest.fixture(scope="module")
def kafka_engine() -> Iterator[Lab]:
    with Lab(brokers=3, topics=TOPICS, engine="kafka") as lab:
        yield lab


@pytest.fixture
def lab(kafka_engine: Lab) -> Iterator[Lab]:
    yield kafka_engine
    kafka_engine.restore()


@pytest.fixture(scope="module")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkSession]:
    """local[2,4] with the connector's jars (the same properties `pipeline run` sets)."""
    options = RunOptions(
        bootstrap="unused:9092", topic="unused", events=1, master=MASTER, sink=SINK_CONNECTOR
    )
    conf = session_conf(options)
    assert conf["spark.jars"] == ",".join(str(p) for p in spark_kafka.jars())
    conf |= {"spark.ui.enabled": "true", "spark.ui.port": "0"}  # failed attempts' errors
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PYSPARK_PYTHON", sys.executable)
        builder = SparkSession.builder.master(MASTER).appName("hangwatch-tests-connector")
        for key, value in conf.items():
            builder = builder.config(key, value)
        session = builder.getOrCreate()
        session.sparkContext.setLogLevel("OFF")  # the Java producer's WARN lines
        try:
            yield session
        finally:
            stop_spark(session)


def _options(lab: Lab, topic: str, sink: str, **changes: object) -> RunOptions:
    fields: dict[str, object] = {
        "bootstrap": lab.bootstrap,
        "topic": topic,
        "events": 20_000,
        "run_id": new_run_id(),
        "sink": sink,
        "sink_options": USER_OPTIONS,
        "progress_seconds": 1.0,
    }
    fields.update(changes)
    return RunOptions(**fields)  # type: ignore[arg-type]


def test_batch_sink_delivers_every_event_once_with_the_users_producer_options(
    spark: SparkSession, lab: Lab
) -> None:
    options = _options(lab, "batch", SINK_CONNECTOR)
    summary = run_pipeline(spark, options, None)
    assert summary.ok, summary.render()
    assert summary.tallies.sent == summary.tallies.acknowledged == 20_000
    assert summary.tallies.tasks == summary.partitions
    result = verify(lab.bootstrap, "batch", 20_000, options.run_id, timeout_seconds=60)
    assert (result.missing, result.complete) == (0, True)
    if summary.failed_attempts == 0:
        assert result.duplicates == 0
        return
    errors = failed_attempt_errors(spark)
    # the module's session ran this test first: its failed attempts are this run's
    assert len(errors) >= summary.failed_attempts, (summary.render(), errors)
    warnings.warn(f"{len(errors)} task attempts failed, run again: {errors}", stacklevel=1)
    classified = [classify_message(error) for error in errors]
    assert not [c for c in classified if c and c.info.restart is Restart.MEETS_AGAIN], errors
    per_partition = math.ceil(20_000 / summary.partitions)
    assert result.duplicates <= summary.failed_attempts * per_partition, (result, errors)


def test_metadata_that_never_comes_fails_every_attempt_after_the_users_max_block(
    spark: SparkSession, lab: Lab
) -> None:
    for broker in lab.brokers:
        lab.unresponsive(broker)
    options = _options(
        lab,
        "blocked",
        SINK_CONNECTOR,
        events=100,
        partitions=1,
        sink_options={**USER_OPTIONS, "kafka.max.block.ms": "2500"},
    )
    summary = run_pipeline(spark, options, None)
    assert not summary.ok
    assert summary.error is not None
    assert summary.error.startswith("TimeoutException: Topic blocked not present in metadata")
    assert "after 2500 ms" in summary.error and "\n" not in summary.error
    errors = failed_attempt_errors(spark)  # every attempt failed so, as the driver says
    assert sum("Topic blocked not present in metadata after 2500 ms" in e for e in errors) >= 4
    assert summary.tallies.acknowledged == 0
    assert summary.failed_attempts == 4  # local[2,4]: every attempt, none succeeded


def test_streaming_sink_resumes_from_its_checkpoint_and_rewrites_only_the_uncommitted_batch(
    spark: SparkSession, lab: Lab, tmp_path: Path
) -> None:
    events = 2 * EVENTS_PER_MICRO_BATCH + 5_000
    per_batch, batches = micro_batches(events)
    assert batches == 3
    checkpoint = tmp_path / "checkpoint"
    options = _options(
        lab, "streaming", SINK_CONNECTOR_STREAMING, events=events, checkpoint=str(checkpoint)
    )
    first = run_pipeline(spark, options, None)
    assert first.ok, first.render()
    assert first.tallies.acknowledged == events
    assert set(range(batches)) <= committed_batches(checkpoint)
    result = verify(lab.bootstrap, "streaming", events, options.run_id, timeout_seconds=60)
    assert (result.missing, result.duplicates) == (0, 0)

    # The driver "died" after writing the last micro-batch, before committing it: its
    # offsets are logged, its commit is not (nor anything of the empty batches after it).
    last = batches - 1
    for log, first_removed in (("offsets", last + 1), ("commits", last)):
        for entry in (checkpoint / log).iterdir():
            batch = entry.name.removeprefix(".").removesuffix(".crc")  # N, .N.crc
            if batch.isdigit() and int(batch) >= first_removed:  # not a stopped write's .tmp
                entry.unlink()
    again = run_pipeline(spark, options, None)
    assert again.ok, again.render()
    assert again.expected == again.tallies.acknowledged == batch_rows(last, per_batch, events)
    assert last in committed_batches(checkpoint)
    result = verify(lab.bootstrap, "streaming", events, options.run_id, timeout_seconds=60)
    assert result.missing == 0
    assert result.duplicates == batch_rows(last, per_batch, events)
