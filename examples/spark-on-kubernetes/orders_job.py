"""The example's PySpark job: generated order events written to Kafka through hangwatch-producer.

What the Dockerfile next to it puts at /opt/hangwatch/job.py, on Apache Spark's official
image with `hangwatch-producer` as the only hangwatch distribution: a job written the
way a user writes one, importing nothing of hangwatch but `hangwatch_producer`, on the
image's own python3 (3.10; the package supports 3.9 and later). It takes the arguments
sparkapplication.yaml and spark-submit.sh give (a subset of the reference pipeline's,
hangwatch_pipeline/job.py): `--bootstrap`, `--topic`, `--events N` or `--rate R/s`
with `--duration S`, `--partitions`, `--run-id`, and `-X key=value` librdkafka
properties, whose `${VAR}` parts are taken from the executor's environment (the Kafka
credentials' secretKeyRef variables). Each task writes its share of events inside one
`hangwatch_producer.producer` block: leaving it raises unless every message was
acknowledged, so Spark retries the task (at-least-once). Every event carries `run_id`
and `seq`, so `hangwatch pipeline verify --run-id` checks that none was lost.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import time
import uuid
import zlib
from collections.abc import Iterable

from pyspark.sql import SparkSession

import hangwatch_producer

UNITS = {"": 1, "k": 1_000, "m": 1_000_000}
SECONDS = {"s": 1, "m": 60, "h": 3600}
EVENTS_PER_TASK = 25_000


def rate_per_second(text: str) -> float:
    """`20k/s` -> 20000.0."""
    found = re.fullmatch(r"(\d+(?:\.\d+)?)([km]?)/s", text.strip().lower())
    if not found:
        raise SystemExit(f"--rate {text!r}: expected e.g. 5000/s or 20k/s")
    return float(found.group(1)) * UNITS[found.group(2)]


def duration_seconds(text: str) -> float:
    """`10m` -> 600.0."""
    found = re.fullmatch(r"(\d+(?:\.\d+)?)([smh])", text.strip().lower())
    if not found:
        raise SystemExit(f"--duration {text!r}: expected e.g. 30s, 10m or 1h")
    return float(found.group(1)) * SECONDS[found.group(2)]


def properties(assignments: Iterable[str]) -> dict[str, str]:
    """`-X key=value` pairs, `${VAR}` taken from the environment (where the task runs)."""
    conf = {}
    for assignment in assignments:
        key, sep, value = assignment.partition("=")
        if not sep or not key:
            raise SystemExit(f"-X {assignment!r}: expected key=value")
        conf[key.strip()] = os.path.expandvars(value)
    return conf


def write_partition(
    index: int, seqs: Iterable[int], conf: list[str], topic: str, run_id: str, rate: float
) -> Iterable[int]:
    """Send this task's events (paced to `rate` per second if > 0); yields how many.

    `conf`: the `-X` assignments plus `bootstrap.servers`, expanded here on the executor.
    """
    sent, started = 0, time.monotonic()
    with hangwatch_producer.producer(properties(conf)) as producer:
        for seq in seqs:
            digest = zlib.crc32(f"{run_id}:{seq}".encode())
            entity = f"customer-{digest % 10_000:05d}"
            event = {
                "run_id": run_id,
                "seq": seq,
                "entity_id": entity,
                "amount_cents": (digest >> 14) % 25_000,
                "task_partition": index,
            }
            producer.send(topic, json.dumps(event, separators=(",", ":")), key=entity)
            sent += 1
            if rate > 0 and sent % 100 == 0:
                ahead = sent / rate - (time.monotonic() - started)
                if ahead > 0:
                    time.sleep(ahead)
    yield sent


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--events", type=int)
    parser.add_argument("--rate", help="e.g. 20k/s (with --duration)")
    parser.add_argument("--duration", help="e.g. 10m (with --rate)")
    parser.add_argument("--partitions", type=int)
    parser.add_argument("--run-id", default=uuid.uuid4().hex[:12])
    parser.add_argument("-X", dest="properties", action="append", default=[])
    args = parser.parse_args(argv)
    rate = rate_per_second(args.rate) if args.rate else 0.0
    if args.events is not None:
        total = args.events
    elif args.rate and args.duration:
        total = int(rate * duration_seconds(args.duration))
    else:
        raise SystemExit("give --events N, or --rate R/s with --duration S")
    partitions = args.partitions or max(1, -(-total // EVENTS_PER_TASK))
    # ${VAR} is expanded on each executor (where the credentials' variables are set)
    conf = [f"bootstrap.servers={args.bootstrap}", *args.properties]
    properties(conf)  # a malformed -X fails here, on the driver, before any task
    per_task_rate = rate / partitions if rate else 0.0
    spark = SparkSession.builder.appName("orders-enricher").getOrCreate()
    sent = (
        spark.sparkContext.range(0, total, numSlices=partitions)
        .mapPartitionsWithIndex(
            lambda i, seqs: write_partition(i, seqs, conf, args.topic, args.run_id, per_task_rate)
        )
        .sum()
    )
    print(f"orders-enricher: run {args.run_id}: {sent} of {total} events acknowledged")
    spark.stop()


if __name__ == "__main__":
    main()
