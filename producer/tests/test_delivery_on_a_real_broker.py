"""At-least-once per task on a real broker, under whatever Python runs the tests.

Covered: every message sent in the block is acknowledged, counted and stored by the
broker (read back with a consumer); a job's `on_delivery` runs off the poll thread and
may itself `send()` (the S4 pattern) without blocking delivery; a cluster nobody
answers makes leaving the block raise `DeliveryFailed` with the counts, after the
message timeout; a bad configuration is one `UsageError` line, before any connection.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition

import hangwatch_producer
from hangwatch_producer import DeliveryFailed, ProducerSettings
from hangwatch_producer import producer as open_producer
from hangwatch_producer.errors import UsageError

FAST = ProducerSettings(message_timeout_ms=5_000, flush_timeout_seconds=20.0)


def stored(bootstrap: str, topic: str, partitions: int) -> list[bytes]:
    """Every value in `topic`, each partition read from its start to its end."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"{topic}-reader", "enable.auto.commit": False}
    )
    try:
        values: list[bytes] = []
        for partition in range(partitions):
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), 10)
            consumer.assign([TopicPartition(topic, partition, low)])
            offset = low
            while offset < high:
                batch = consumer.consume(high - offset, 10)
                assert batch, f"partition {partition}: nothing to read at {offset} below {high}"
                for message in batch:
                    value, at = message.value(), message.offset()
                    assert message.error() is None and value is not None and at is not None
                    values.append(value)
                    offset = at + 1
        return values
    finally:
        consumer.close()


def test_every_message_is_acknowledged_and_stored(bootstrap: str, topic: str) -> None:
    with hangwatch_producer.producer({"bootstrap.servers": bootstrap}, FAST) as p:
        for i in range(1000):
            p.send(topic, f"value-{i}", key=str(i))
    counters = p.counters()
    assert (counters.enqueued, counters.delivered, counters.failed) == (1000, 1000, 0)
    assert sorted(stored(bootstrap, topic, 3)) == sorted(f"value-{i}".encode() for i in range(1000))


def test_a_delivery_callback_that_sends_does_not_block_delivery(bootstrap: str, topic: str) -> None:
    seen: list[Any] = []
    threads: set[str] = set()

    with hangwatch_producer.producer({"bootstrap.servers": bootstrap}, FAST) as p:

        def resend(err: Any, msg: Any) -> None:
            threads.add(threading.current_thread().name)
            seen.append(err)
            if msg.value() == b"first":
                p.send(topic, b"second")  # sends from the callback thread, as S4 did
                p.flush(10)

        p.send(topic, b"first", on_delivery=resend)
    assert seen == [None]
    assert all(name.startswith("hangwatch-callbacks-") for name in threads)
    assert p.counters().delivered == 2
    assert sorted(stored(bootstrap, topic, 3)) == [b"first", b"second"]


def test_a_cluster_that_never_answers_makes_the_block_raise() -> None:
    # a port nothing listens on: every message times out after message.timeout.ms
    settings = ProducerSettings(message_timeout_ms=2_000, flush_timeout_seconds=10.0)
    nowhere = {"bootstrap.servers": "127.0.0.1:1"}
    with pytest.raises(DeliveryFailed) as caught, open_producer(nowhere, settings) as p:
        for i in range(5):
            p.send("nowhere", f"value-{i}")
    counters = caught.value.counters
    assert (counters.enqueued, counters.delivered, counters.failed) == (5, 0, 5)
    assert "_MSG_TIMED_OUT" in str(caught.value)


@pytest.mark.parametrize(
    ("conf", "named"),
    [
        ({}, "bootstrap.servers"),
        ({"bootstrap.servers": "b:9092", "acks": "0"}, "acks=0"),
        ({"bootstrap.servers": "b:9092", "message.timeout.ms": 0}, "message.timeout.ms"),
        ({"bootstrap.servers": "b:9092", "no.such.property": "1"}, "no.such.property"),
    ],
)
def test_a_bad_configuration_is_one_line_naming_it(conf: dict[str, Any], named: str) -> None:
    with pytest.raises(UsageError) as caught:
        hangwatch_producer.producer(conf)
    assert named in str(caught.value) and "\n" not in str(caught.value)
