"""Shared helpers of the Spark pipeline tests (not a test module).

`start_spark` / `stop_spark` (from `hangwatch_testing.spark_driver`) bracket one
SparkSession *and* the JVM pyspark launched for it, so no java process outlives a test
module. `TelemetryWatcher` samples the telemetry directory while a run is under way:
producers remove their files when they close, so the files can only be seen while tasks
run. `run_in_background` runs the pipeline on a thread so a test can break the lab
mid-run.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, TopicPartition
from pyspark.sql import SparkSession

from hangwatch.spark_driver import parse_ui_url
from hangwatch_pipeline.job import run_pipeline, session_conf
from hangwatch_pipeline.run_options import RunOptions
from hangwatch_pipeline.run_report import Summary
from hangwatch_sidecar.spark.client import DriverClient, DriverReader

MASTER = "local[2,4]"
"""Two cores, up to four attempts per task: Spark retries a failed task as on a cluster."""


def start_spark(telemetry_dir: Path, app_name: str) -> SparkSession:
    """A local[2,4] session whose tasks get HANGWATCH_TELEMETRY_DIR=`telemetry_dir`."""
    options = RunOptions(
        bootstrap="unused:9092",
        topic="unused",
        events=1,
        master=MASTER,
        telemetry_dir=str(telemetry_dir),
        app_name=app_name,
    )
    builder = SparkSession.builder.master(MASTER).appName(app_name)
    for key, value in session_conf(options).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def run_in_background(spark: SparkSession, options: RunOptions) -> Future[Summary]:
    """The pipeline running on its own thread (progress discarded)."""
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="pipeline-run")
    future = pool.submit(run_pipeline, spark, options, None)
    pool.shutdown(wait=False)
    return future


class TelemetryWatcher:
    """Collects every telemetry document seen in a directory while it runs."""

    def __init__(self, directory: Path, period_seconds: float = 0.02) -> None:
        self.directory = directory
        self.period = period_seconds
        self.documents: dict[str, list[dict[str, Any]]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="telemetry-watcher", daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self.period):
            for path in self.directory.glob("producer-*.json"):
                try:
                    doc = json.loads(path.read_bytes())
                except (OSError, ValueError):
                    continue  # removed between glob and read: the producer closed
                seen = self.documents.setdefault(path.name, [])
                if not seen or seen[-1].get("seq") != doc.get("seq"):
                    seen.append(doc)

    def all(self) -> list[dict[str, Any]]:
        return [doc for docs in self.documents.values() for doc in docs]

    @contextmanager
    def running(self) -> Iterator[TelemetryWatcher]:
        self._thread.start()
        try:
            yield self
        finally:
            self._stop.set()
            self._thread.join(5.0)


def read_events(bootstrap: str, topic: str, timeout: float = 30.0) -> list[dict[str, Any]]:
    """Every event in `topic` (decoded JSON values), read to the current end."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "hangwatch-tests-read",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    try:
        partitions = consumer.list_topics(topic, timeout=timeout).topics[topic].partitions
        ends = {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout)
            for p in partitions
        }
        pending = {p: high for p, (low, high) in ends.items() if high > low}
        consumer.assign([TopicPartition(topic, p, ends[p][0]) for p in pending])
        events: list[dict[str, Any]] = []
        deadline = time.monotonic() + timeout
        while pending and time.monotonic() < deadline:
            for msg in consumer.consume(1000, timeout=0.5):
                if msg.error() is None and msg.partition() in pending:
                    events.append(json.loads(msg.value() or b"null"))
                    if (msg.offset() or 0) >= pending[msg.partition() or 0] - 1:
                        del pending[msg.partition() or 0]
        assert not pending, f"could not read {topic} to its end"
        return events
    finally:
        consumer.close()


def failed_attempt_errors(spark: SparkSession) -> list[str]:
    """What each failed task attempt of the session's application failed with (Spark's
    `errorMessage`, read from its driver by the sidecar's reader, finished stages too):
    the session needs `spark.ui.enabled`. Local mode runs its tasks on the executor
    `driver`."""
    sc = spark.sparkContext
    client = DriverClient(parse_ui_url(sc.uiWebUrl or ""), 30.0)
    reader = DriverReader(client, sc.applicationId, "driver")
    return [a.error for a in reader.read_failed_attempts(("active", "complete", "failed"))]
