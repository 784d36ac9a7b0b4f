"""Builders and fixtures of the Spark view tests (no I/O beyond reading fixture files).

The thread dumps in `spark_fixtures/` were recorded from real Spark executors' REST API
and say so inside (`recorded`): a PySpark executor, and executors running the real Java
Kafka client (scripts/record_thread_dumps.py).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hangwatch_sidecar.spark.types import (
    Activity,
    ProducerThread,
    RunningTask,
    SparkSnapshot,
    SparkView,
    StagePeers,
    TaskThread,
    ThreadObservation,
    ThreadRole,
)

FIXTURES = Path(__file__).resolve().parent / "spark_fixtures"


def dump(name: str) -> list[Any]:
    """The thread list of fixture `name` (its label checked: recorded)."""
    doc = json.loads((FIXTURES / name).read_text())
    assert "RECORDED" in doc.get("recorded", ""), f"{name} is not labelled as recorded"
    threads = doc["threads"]
    assert isinstance(threads, list)
    return threads


def task(tid: int = 7, stage: int = 3, index: int = 1, attempt: int = 0) -> TaskThread:
    name = f"Executor task launch worker for task {index}.{attempt} in stage {stage}.0 (TID {tid})"
    return TaskThread(tid, name, stage, 0, index, attempt)


def peers(complete: int = 10, median: float | None = 2.0, failed: int = 0) -> StagePeers:
    return StagePeers(3, 0, 20, 5, complete, failed, 0, median)


def thread(
    activity: Activity,
    *,
    role: ThreadRole = ThreadRole.TASK,
    name: str = "Executor task launch worker for task 1.0 in stage 3.0 (TID 7)",
    task_id: int | None = 7,
    state: str = "WAITING",
    thread_id: int = 41,
    user_frame: str | None = None,
) -> ProducerThread:
    return ProducerThread(
        thread_id,
        name,
        role,
        activity,
        state,
        "org.apache.kafka.clients.producer.KafkaProducer.waitOnMetadata",
        user_frame=user_frame,
        waits_on="java.lang.Object@1",
        detail="waits",
        task_id=task_id,
    )


def network(activity: Activity = Activity.IN_CALLBACK, state: str = "WAITING") -> ProducerThread:
    return thread(
        activity,
        role=ThreadRole.NETWORK,
        name="kafka-producer-network-thread | orders",
        task_id=None,
        state=state,
        thread_id=51,
        user_frame="com.example.Cb.onCompletion" if activity is Activity.IN_CALLBACK else None,
    )


def view(
    tasks: tuple[RunningTask, ...] = (),
    threads: tuple[ThreadObservation, ...] = (),
    **kw: Any,
) -> SparkView:
    return SparkView(at=100.0, available=True, tasks=tasks, threads=threads, **kw)


def snapshot(at: float, **kw: Any) -> SparkSnapshot:
    return SparkSnapshot(at=at, **kw)
