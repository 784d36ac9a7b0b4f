"""Reads a topic back and counts each `ev-<n>` event: what was lost, what came twice."""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass

from confluent_kafka import Consumer, TopicPartition


@dataclass(frozen=True)
class Delivery:
    """Events 0..expected-1 that are missing from the topic, and how many came twice."""

    expected: int
    missing: int
    duplicates: int


def read_events(bootstrap: str, topic: str, timeout_seconds: float = 30.0) -> Counter[int]:
    """How many times each event number is in `topic` (read to the high watermarks)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "hangwatch-demo-verify",
            "enable.auto.commit": False,
            "log_level": 0,
        }
    )
    counts: Counter[int] = Counter()
    try:
        meta = consumer.list_topics(topic, timeout=10).topics[topic]
        ends = {}
        for p in meta.partitions:
            _low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            ends[p] = high
        consumer.assign([TopicPartition(topic, p, 0) for p, high in ends.items() if high > 0])
        remaining = {p for p, high in ends.items() if high > 0}
        deadline = time.monotonic() + timeout_seconds
        while remaining and time.monotonic() < deadline:
            for msg in consumer.consume(1000, timeout=0.5):
                if msg.error():
                    continue
                value = (msg.value() or b"").decode(errors="replace")
                if value.startswith("ev-"):
                    counts[int(value[3:])] += 1
                offset, partition = msg.offset(), msg.partition()
                if offset is not None and partition is not None and offset + 1 >= ends[partition]:
                    remaining.discard(partition)
    finally:
        consumer.close()
    return counts


def check(counts: Counter[int], expected: int) -> Delivery:
    """Missing and duplicated events among 0..expected-1."""
    missing = sum(1 for n in range(expected) if counts[n] == 0)
    duplicates = sum(c - 1 for n, c in counts.items() if c > 1 and n < expected)
    return Delivery(expected, missing, duplicates)
