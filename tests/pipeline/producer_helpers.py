"""Shared helpers of the producer-wrapper tests: deadlines instead of sleeps, fast settings."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, TopicPartition

from hangwatch_lab import Lab
from hangwatch_pipeline import ProducerSettings
from hangwatch_producer.producer import THREAD_ROLES, thread_name
from hangwatch_testing.waiting import wait_for

IDENTITY_ENV = (
    "HANGWATCH_POD_NAME",
    "HANGWATCH_POD_NAMESPACE",
    "HANGWATCH_NODE_NAME",
    "HANGWATCH_EXECUTOR_ID",
    "SPARK_APPLICATION_ID",
    "SPARK_EXECUTOR_ID",
)

FAST = ProducerSettings(message_timeout_ms=3_000, flush_timeout_seconds=10.0)
"""Short message timeout: a broken cluster fails a test in seconds, not a minute."""


def producer_threads() -> list[str]:
    """Names of the wrapper's threads still alive (not other hangwatch threads a test on
    the same worker may have left, such as a sidecar's HTTP server)."""
    prefixes = tuple(thread_name(role, 0)[:-1] for role in THREAD_ROLES)
    return [t.name for t in threading.enumerate() if t.name.startswith(prefixes)]


def read_doc(path: Path) -> dict[str, Any]:
    """The telemetry document at `path`."""
    doc: dict[str, Any] = json.loads(path.read_bytes())
    return doc


def doc_where(path: Path, predicate: Callable[[dict[str, Any]], bool], timeout: float) -> Any:
    """The first telemetry document at `path` satisfying `predicate`."""

    def check() -> dict[str, Any] | None:
        if not path.exists():
            return None
        doc = read_doc(path)
        return doc if predicate(doc) else None

    return wait_for(check, timeout, f"a telemetry document in {path.name}")


CRASH_SCRIPT = """
import os, sys
from hangwatch_pipeline import ProducerSettings, producer
p = producer({"bootstrap.servers": sys.argv[1]}, ProducerSettings())
p.send("t", b"x")
p.flush(10)
print(p.telemetry_path, flush=True)
os._exit(1)
"""
"""A producer process that sends, then dies without closing (its files stay behind)."""


def crashed_producer(bootstrap: str) -> tuple[subprocess.CompletedProcess[str], Path]:
    """Run CRASH_SCRIPT in a child process: its result and the telemetry file it left."""
    run = subprocess.run(
        [sys.executable, "-c", CRASH_SCRIPT, bootstrap],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return run, Path(run.stdout.strip())


def stored_messages(lab: Lab, topic: str, partitions: int) -> int:
    """How many messages the lab's topic holds (sum of high watermarks)."""
    consumer = Consumer({"bootstrap.servers": lab.bootstrap, "group.id": "hangwatch-tests"})
    try:
        return sum(
            consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=5)[1]
            for p in range(partitions)
        )
    finally:
        consumer.close()
