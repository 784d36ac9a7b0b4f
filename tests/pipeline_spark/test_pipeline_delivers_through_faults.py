"""The pipeline loses no event: at-least-once per task, against the real lab and real Spark.

Covered, with pyspark `local[2,4]` (4 attempts per task) and the 3-broker lab:
- a healthy run of 100,000 events: every event acknowledged, read back once each
  (idempotent producer: no duplicates), no task retried; events/s printed;
- a broker taken down mid-run (110,000 events paced at 11,000/s) and brought back 4 s
  later: the producers saw it go (telemetry statistics), the run succeeds and `verify`
  finds 0 missing events;
- a broker down for 4.5 s with a 3 s message timeout: messages time out, closing the
  producer raises `DeliveryFailed`, the task fails and Spark retries it; the retries
  deliver (summary: retried tasks > 0) and `verify` finds 0 missing;
- produce requests rejected with TOPIC_AUTHORIZATION_FAILED: the attempts whose
  messages were not all acknowledged fail, Spark retries them, the summary shows the
  retried tasks (> 0) and failed attempts, and `verify` finds 0 missing (duplicates
  allowed);
- a fault outlasting every attempt: the run reports failure with the producer's
  one-line reason instead of claiming success.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from hangwatch_lab import Lab
from hangwatch_pipeline.job import run_pipeline
from hangwatch_pipeline.run_options import RunOptions, new_run_id
from hangwatch_pipeline.verify import verify
from hangwatch_testing.waiting import wait_for

from .helpers import TelemetryWatcher, run_in_background


def _options(kafka: Lab, topic: str, **changes: object) -> RunOptions:
    fields: dict[str, object] = {
        "bootstrap": kafka.bootstrap,
        "topic": topic,
        "events": 100_000,
        "run_id": new_run_id(),
        "progress_seconds": 1.0,
    }
    fields.update(changes)
    return RunOptions(**fields)  # type: ignore[arg-type]


def _broker_state(doc: dict[str, Any], address: str) -> str:
    """The producer's state of the broker at `address` ("gone": not in its metadata)."""
    brokers = ((doc.get("stats") or {}).get("brokers") or {}).values()
    if not brokers:
        return "UP"  # no statistics yet: nothing seen
    return next((b["state"] for b in brokers if b.get("nodename") == address), "gone")


def test_healthy_run_delivers_every_event_exactly_once(spark: SparkSession, kafka: Lab) -> None:
    options = _options(kafka, "healthy")
    summary = run_pipeline(spark, options, None)
    assert summary.ok, summary.render()
    assert summary.tallies.sent == summary.tallies.acknowledged == 100_000
    assert summary.tallies.retried_tasks == summary.failed_attempts == 0
    assert summary.tallies.tasks == summary.partitions >= 2
    print(
        f"\nhealthy: {summary.events_per_second:,.0f} events/s ({summary.duration_seconds:.1f} s)"
    )
    result = verify(kafka.bootstrap, "healthy", 100_000, options.run_id, timeout_seconds=60)
    assert (result.missing, result.duplicates, result.complete) == (0, 0, True)


def test_broker_down_mid_run_loses_nothing(
    spark: SparkSession, kafka: Lab, telemetry_dir: Path
) -> None:
    options = _options(kafka, "down", events=110_000, rate_per_second=11_000.0)
    started = time.monotonic()
    with TelemetryWatcher(telemetry_dir).running() as watcher:
        running = run_in_background(spark, options)
        wait_for(lambda: watcher.documents, 30, "the tasks' producers to start")
        time.sleep(3.0)
        kafka.down(2)
        time.sleep(4.0)
        assert not running.done(), "the run ended before the fault was over: not mid-run"
        kafka.restore()
        restored_at = time.monotonic() - started
        summary = running.result(timeout=120)
    assert any(_broker_state(doc, kafka.brokers[2].address) != "UP" for doc in watcher.all()), (
        "no producer saw broker 2 down"
    )
    assert summary.ok, summary.render()
    assert summary.duration_seconds > restored_at - 1
    result = verify(kafka.bootstrap, "down", 110_000, options.run_id, timeout_seconds=60)
    assert result.complete and result.missing == 0, result.render()


def test_timed_out_messages_fail_the_task_and_the_retry_delivers(
    spark: SparkSession, kafka: Lab, telemetry_dir: Path
) -> None:
    options = _options(
        kafka,
        "timeout",
        events=60_000,
        partitions=6,
        producer_conf={"message.timeout.ms": "3000"},
        rate_per_second=6_000.0,  # ~10 s: the fault lands mid-run however loaded the machine
    )
    with TelemetryWatcher(telemetry_dir).running() as watcher:
        running = run_in_background(spark, options)
        wait_for(lambda: watcher.documents, 30, "the tasks' producers to start")
        kafka.down(2)
        time.sleep(4.5)  # longer than one message timeout, shorter than three
        assert not running.done(), "the run ended before the fault was over: not mid-run"
        kafka.restore()
        summary = running.result(timeout=120)
    assert summary.ok, summary.render()
    assert summary.tallies.retried_tasks > 0, summary.render()
    print(
        f"\nbroker down, 3 s message timeout: {summary.tallies.retried_tasks} retried tasks, "
        f"{summary.failed_attempts} failed attempts"
    )
    result = verify(kafka.bootstrap, "timeout", 60_000, options.run_id, timeout_seconds=60)
    assert result.complete and result.missing == 0, result.render()


def test_unacknowledged_task_fails_and_is_retried(spark: SparkSession, kafka: Lab) -> None:
    kafka.request_errors("produce", "TOPIC_AUTHORIZATION_FAILED", 3)
    options = _options(kafka, "authz")
    summary = run_pipeline(spark, options, None)
    assert summary.ok, summary.render()
    assert summary.tallies.retried_tasks > 0
    assert summary.failed_attempts >= summary.tallies.retried_tasks
    assert summary.tallies.acknowledged == 100_000
    print(
        f"\nauthorization errors: {summary.tallies.retried_tasks} retried tasks, "
        f"{summary.failed_attempts} failed attempts"
    )
    result = verify(kafka.bootstrap, "authz", 100_000, options.run_id, timeout_seconds=60)
    assert result.complete and result.missing == 0, result.render()
    print(f"duplicates from the failed attempts: {result.duplicates:,}")


def test_fault_outlasting_every_attempt_fails_the_run(spark: SparkSession, kafka: Lab) -> None:
    kafka.request_errors("produce", "TOPIC_AUTHORIZATION_FAILED", 100_000)
    options = _options(kafka, "exhausted", events=2_000, partitions=1)
    summary = run_pipeline(spark, options, None)
    assert not summary.ok
    assert summary.error is not None and "Topic authorization failed" in summary.error
    assert "\n" not in summary.error
    assert summary.tallies.tasks == 0 and summary.failed_attempts == 4
    assert "FAILED: " in summary.render()
