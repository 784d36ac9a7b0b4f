"""Benchmark of the librdkafka time-to-error model against a real producer, unloaded.

With every broker of the local lab blackholed in the kernel (netfilter DROP, seeds
S0/S3), a real confluent-kafka producer with `message.timeout.ms=3000` sends one
message per partition, staggered across librdkafka's 1 s expiry scan, for `--runs`
rounds. Prints, measured in one run on this machine: the seconds from each `produce()`
to its `_MSG_TIMED_OUT` report (min, median, max) next to the message timeout and the
model's worst case (`hangwatch.time_to_error`: message timeout + 1 s scan), and how far
the latest report went past the model. Target: no report later than the model's worst
case + 0.25 s (thread wake-up of librdkafka's broker thread). Needs root and iptables.

    python benchmarks/config_check_model.py [--runs 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

from confluent_kafka import KafkaError, Message, Producer
from machine import describe, unwind_on_sigterm

from hangwatch.time_to_error import librdkafka
from hangwatch.time_to_error.estimate import worst_case_of
from hangwatch_lab import Lab, netfilter

MESSAGE_TIMEOUT_MS = 3000
PARTITIONS = 3
STAGGER_SECONDS = 0.3
WAIT_SECONDS = 60.0
WAKE_UP_ALLOWANCE_SECONDS = 0.25
"""The expiry scan is a timer of librdkafka's broker thread, not a hard deadline."""


def one_round(lab: Lab) -> list[float]:
    """Seconds from produce() to the _MSG_TIMED_OUT report of one message per partition."""
    config = {"bootstrap.servers": lab.bootstrap, "message.timeout.ms": str(MESSAGE_TIMEOUT_MS)}
    producer = Producer({**config, "log_level": "0"})
    warm: list[KafkaError | None] = []
    producer.produce("t", b"warm", on_delivery=lambda err, _msg: warm.append(err))
    producer.flush(10)
    if warm != [None]:
        raise RuntimeError(f"warm-up message not delivered: {warm}")
    for broker in lab.brokers:
        lab.blackhole(broker)
    reports: list[tuple[float, KafkaError | None]] = []
    try:
        for partition in range(PARTITIONS):
            started = time.monotonic()

            def report(err: KafkaError | None, _msg: Message, started: float = started) -> None:
                reports.append((time.monotonic() - started, err))

            producer.produce("t", b"x", partition=partition, on_delivery=report)
            producer.poll(STAGGER_SECONDS)
        deadline = time.monotonic() + WAIT_SECONDS
        while len(reports) < PARTITIONS and time.monotonic() < deadline:
            producer.poll(0.02)
    finally:
        lab.restore()
        producer.purge()
        producer.flush(5)
    wrong = [err for _, err in reports if err is None or err.code() != KafkaError._MSG_TIMED_OUT]
    if len(reports) < PARTITIONS or wrong:
        raise RuntimeError(f"expected {PARTITIONS} _MSG_TIMED_OUT reports, got {reports}")
    return [seconds for seconds, _ in reports]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    reason = netfilter.available()
    if reason is not None:
        print(f"benchmarks/config_check_model.py: cannot blackhole brokers: {reason}")
        return 3
    config = {"message.timeout.ms": str(MESSAGE_TIMEOUT_MS)}
    worst = worst_case_of(librdkafka, config, brokers=3).total_seconds
    print(f"machine: {describe()}")
    print(f"message.timeout.ms {MESSAGE_TIMEOUT_MS}, {PARTITIONS} partitions, {args.runs} runs")
    seconds: list[float] = []
    with Lab(brokers=3, topics={"t": PARTITIONS}) as lab:
        print(f"lab engine: {lab.engine_description}")
        for n in range(1, args.runs + 1):
            print(f"  run {n}/{args.runs}", file=sys.stderr, flush=True)
            seconds += one_round(lab)
    latest = max(seconds)
    print(f"{'':28} {'seconds':>8}")
    print(f"{'message timeout':28} {MESSAGE_TIMEOUT_MS / 1000:8.2f}")
    print(f"{'observed min':28} {min(seconds):8.2f}")
    print(f"{'observed median':28} {statistics.median(seconds):8.2f}")
    print(f"{'observed max':28} {latest:8.2f}")
    print(f"{'model worst case':28} {worst:8.2f}")
    print(f"{'max past the model':28} {latest - worst:8.2f}")
    budget = worst + WAKE_UP_ALLOWANCE_SECONDS
    print(
        f"target: every report after the message timeout and by the model + "
        f"{WAKE_UP_ALLOWANCE_SECONDS} s = {budget:.2f} s: "
        f"{'met' if min(seconds) >= MESSAGE_TIMEOUT_MS / 1000 and latest <= budget else 'MISSED'}"
    )
    return 0


if __name__ == "__main__":
    unwind_on_sigterm()
    sys.exit(main())
