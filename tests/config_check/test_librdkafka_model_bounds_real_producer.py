"""A real confluent-kafka producer's delivery error comes after the message timeout.

Covers: against the lab's 3-broker Kafka-protocol cluster with every broker
blackholed in the kernel (netfilter DROP, as in seeds S0/S3), messages produced with
`message.timeout.ms=3000` each get `_MSG_TIMED_OUT`, and only after their message
timeout has run (the order the librdkafka model assumes). How late the error is next to
the model's worst case (3 s + 1 s expiry scan) is a timing, measured unloaded by
`benchmarks/config_check_model.py`, not asserted here.
"""

from __future__ import annotations

import time

from confluent_kafka import KafkaError, Message, Producer

from hangwatch_lab import Lab

MESSAGE_TIMEOUT_MS = 3000
POLL_SECONDS = 0.02
WAIT_SECONDS = 60.0
"""Liveness only: how long the reports are waited for (the model says about 4 s)."""


def test_delivery_errors_come_after_the_message_timeout(lab: Lab, kernel_faults: None) -> None:
    config = {"bootstrap.servers": lab.bootstrap, "message.timeout.ms": str(MESSAGE_TIMEOUT_MS)}
    producer = Producer({**config, "log_level": "0"})
    warm: list[KafkaError | None] = []
    producer.produce("t", b"warm", on_delivery=lambda err, _msg: warm.append(err))
    producer.flush(10)
    assert warm == [None]
    for broker in lab.brokers:
        lab.blackhole(broker)
    reports: list[tuple[float, KafkaError | None]] = []
    for partition in range(3):
        started = time.monotonic()

        def report(err: KafkaError | None, _msg: Message, started: float = started) -> None:
            reports.append((time.monotonic() - started, err))

        producer.produce("t", b"x", partition=partition, on_delivery=report)
        producer.poll(0.3)  # staggers the messages across the 1 s expiry scan
    deadline = time.monotonic() + WAIT_SECONDS
    while len(reports) < 3 and time.monotonic() < deadline:
        producer.poll(POLL_SECONDS)
    assert len(reports) == 3
    for elapsed, err in reports:
        assert err is not None and err.code() == KafkaError._MSG_TIMED_OUT
        assert elapsed >= MESSAGE_TIMEOUT_MS / 1000
