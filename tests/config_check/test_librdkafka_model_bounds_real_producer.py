"""A real confluent-kafka producer reports within the librdkafka model's worst case.

Covers: against the lab's 3-broker Kafka-protocol cluster with every broker
blackholed in the kernel (netfilter DROP, as in seeds S0/S3), messages produced with
`message.timeout.ms=3000` get `_MSG_TIMED_OUT` no earlier than 3 s and no later than
the model's figure (3 s + 1 s expiry scan).
"""

from __future__ import annotations

import time

from confluent_kafka import KafkaError, Message, Producer

from hangwatch.time_to_error import librdkafka
from hangwatch.time_to_error.estimate import worst_case_of
from hangwatch_lab import Lab

MESSAGE_TIMEOUT_MS = 3000
POLL_SECONDS = 0.02
SCHEDULING_SLACK_SECONDS = 0.25
"""The expiry scan is a timer of librdkafka's broker thread, not a hard deadline: allow
for thread wake-up on a loaded machine (measured lateness here: up to 0.99 s of 1 s)."""


def test_delivery_errors_arrive_within_the_modelled_worst_case(
    lab: Lab, kernel_faults: None
) -> None:
    config = {"bootstrap.servers": lab.bootstrap, "message.timeout.ms": str(MESSAGE_TIMEOUT_MS)}
    worst = worst_case_of(librdkafka, config, brokers=3).total_seconds
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
    deadline = time.monotonic() + worst + 5
    while len(reports) < 3 and time.monotonic() < deadline:
        producer.poll(POLL_SECONDS)
    assert len(reports) == 3
    for elapsed, err in reports:
        assert err is not None and err.code() == KafkaError._MSG_TIMED_OUT
        assert MESSAGE_TIMEOUT_MS / 1000 <= elapsed <= worst + SCHEDULING_SLACK_SECONDS
