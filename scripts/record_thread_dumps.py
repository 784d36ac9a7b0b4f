"""Records real thread dumps of real Java Kafka producers for the Spark view's classifier tests.

For each kafka-clients version (0.11.0.3, S4's; 3.9.2, the one Spark's Kafka sink pins),
starts a 3-broker Apache Kafka lab (the `kafka` engine) and a real Spark application
(`local-cluster`, an executor in its own JVM) with that kafka-clients jar and the UDF of
testing/clients/spark-producer-states on its classpath, runs one task per state
(`callback`: a producer whose delivery callback calls `send(...).get()`, and a task
that keeps sending into its full buffer; `flush` on that producer; `metadata`: a
producer whose bootstrap answers nothing; `healthy`: a producer at work) and, once the
executor's stacks show every state (read from the raw frames, not through the
classifier), saves the driver's own thread dump of the executor
(`/api/v1/applications/<app>/executors/<id>/threads`) as
`tests/sidecar/spark_fixtures/recorded_kafka_clients_<version>_states.json`, labelled.

    python scripts/record_thread_dumps.py [--versions 0.11.0.3,3.9.2] [--out DIR]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

import pyspark

from hangwatch_lab import Lab, kafkajars
from hangwatch_sidecar.spark.client import API, DriverClient
from hangwatch_testing.clients.producer_states import (
    SPARK_KAFKA_CLIENTS,
    STATES,
    states_frame,
    udf_jars,
)
from hangwatch_testing.spark_driver import Driver, local_cluster_driver
from hangwatch_testing.waiting import wait_for

OUT = Path(__file__).resolve().parents[1] / "tests" / "sidecar" / "spark_fixtures"
TOPIC = "events"
SIGNS = {
    "callback": "ProducerBatch.completeFutureAndFireCallbacks",
    "buffer": "BufferPool.allocate",
    "flush": "KafkaProducer.flush",
    "metadata": "KafkaProducer.waitOnMetadata",
}
"""A frame each state puts on some stack (raw text), so the dump is saved only once every
state is in it."""


def _start(driver: Driver, bootstrap: str) -> threading.Thread:
    frame = states_frame(driver.spark, bootstrap, TOPIC)

    def run() -> None:
        driver.spark.sparkContext.setJobGroup("states", "states")
        with contextlib.suppress(Exception):  # raised when the job is cancelled, as intended
            frame.collect()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def _kafka_for(client_version: str) -> str | None:
    """The lab's Kafka release for kafka-clients `client_version`: 3.9 (the last line that
    supports clients older than 2.1) for those, else the lab's default (the current 4.x)."""
    major, minor = (int(part) for part in client_version.split(".")[:2])
    return kafkajars.legacy_version() if (major, minor) < (2, 1) else None


def record(version: str, out: Path) -> Path:
    with (
        tempfile.TemporaryDirectory(prefix="hangwatch-record-") as tmp,
        Lab(brokers=3, topics={TOPIC: 3}, engine="kafka", kafka_version=_kafka_for(version)) as lab,
    ):
        work = Path(tmp)
        jars = udf_jars(version, work)
        with local_cluster_driver(work, f"record-{version}", jars, cores=len(STATES)) as driver:
            job = _start(driver, lab.bootstrap)
            client = DriverClient(driver.ui, 60.0)
            path = f"{API}/{driver.application_id}/executors/{driver.executor_id}/threads"

            def complete() -> list[Any] | None:
                threads: list[Any] = client.get_json(path)
                text = json.dumps(threads)
                return threads if all(sign in text for sign in SIGNS.values()) else None

            try:
                threads = wait_for(complete, 240, f"every state in the dump ({version})")
            finally:
                driver.spark.sparkContext.cancelJobGroup("states")
                job.join(60)
    target = out / f"recorded_kafka_clients_{version}_states.json"
    label = (
        f"RECORDED from a real Spark {pyspark.__version__} local-cluster executor JVM "
        f"(/api/v1/applications/<app>/executors/<id>/threads) running the REAL Java Kafka "
        f"client kafka-clients {version} against Apache Kafka (the lab's kafka engine) by "
        "scripts/record_thread_dumps.py: producer 's4-callback' whose delivery callback calls "
        "send(...).get() (its I/O thread waits for itself) with one task sending into its "
        "full buffer and one in its flush(); a task waiting for metadata from a bootstrap "
        "that answers nothing (producer 'no-metadata'); producer 'healthy' at work"
    )
    target.write_text(json.dumps({"recorded": label, "threads": threads}, indent=1) + "\n")
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--versions", default=f"0.11.0.3,{SPARK_KAFKA_CLIENTS}")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    for version in args.versions.split(","):
        print(f"recording kafka-clients {version} ...", file=sys.stderr, flush=True)
        print(record(version, args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
