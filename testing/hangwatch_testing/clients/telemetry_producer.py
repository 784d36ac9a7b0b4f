"""A plain Java KafkaProducer with hangwatch's telemetry loaded, as a process a test drives.

`TelemetryProducer.java` (testing/clients/telemetry-producer; its header says what it
does) is built with `hangwatch.java_build` against the Kafka connector's own
`kafka-clients`, and run beside hangwatch's telemetry jar
(`hangwatch_pipeline.kafka_telemetry`) with `HANGWATCH_TELEMETRY_DIR` set: `JavaProducer`
starts it, waits for its `sent <acknowledged> <failed>` line, and closes it (or kills it)
when the test has read the telemetry files. Everything stops on every path.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pyspark

from hangwatch.child_processes import stop_process
from hangwatch.java_build import JavaJar, kafka_clients
from hangwatch_pipeline import kafka_telemetry, spark_kafka
from hangwatch_testing.waiting import wait_for

JAR = JavaJar(
    source=Path(__file__).parents[2] / "clients" / "telemetry-producer" / "TelemetryProducer.java",
    jar_name="telemetry-producer.jar",
    cache_env="HANGWATCH_TELEMETRY_PRODUCER_CACHE",
    cache_dir="telemetry-producer",
    java_release="17",
    needed_by="the tests' Java telemetry producer",
)
SENT_SECONDS = 120.0
"""How long the producer may take to send, flush and say so."""


def classpath(line: spark_kafka.SparkLine | None = None) -> str:
    """kafka-clients of `line`'s connector (None: the installed pyspark's), slf4j's API
    (kafka-clients logs through it; pyspark ships it), the telemetry jar built against
    that connector, and the test program."""
    connector = spark_kafka.jars(line)
    slf4j = sorted((Path(pyspark.__file__).parent / "jars").glob("slf4j-api-*.jar"))
    jars = [
        kafka_clients(connector),
        *slf4j,
        kafka_telemetry.telemetry_jar(connector),
        JAR.build(connector),
    ]
    return os.pathsep.join(str(p) for p in jars)


@dataclass
class JavaProducer:
    """The running program and what it printed."""

    proc: subprocess.Popen[str]
    acknowledged: int = -1
    failed: int = -1

    def close(self) -> None:
        """Let it close its producer (the reporter removes its files), then end."""
        assert self.proc.stdin is not None
        self.proc.stdin.write("close\n")
        self.proc.stdin.close()
        self.proc.wait(60)

    def kill(self) -> None:
        """End it at once (SIGKILL): nothing of it closes its files."""
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(30)


@contextmanager
def java_producer(
    bootstrap: str,
    topic: str,
    telemetry: Path,
    *,
    count: int = 50,
    value_bytes: int = 100,
    properties: Sequence[str] = (),
    log: Path,
    line: spark_kafka.SparkLine | None = None,
) -> Iterator[JavaProducer]:
    """The program sending `count` records to `topic`, once it said what it sent; with
    the kafka-clients of `line`'s connector (None: the installed pyspark's)."""
    argv = [
        "java", "-cp", classpath(line), "TelemetryProducer",
        bootstrap, topic, str(count), str(value_bytes), *properties,
    ]  # fmt: skip
    env = {**os.environ, "HANGWATCH_TELEMETRY_DIR": str(telemetry)}
    out = log.with_suffix(".out")
    with out.open("w") as stdout, log.open("w") as stderr:
        proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=stdout, stderr=stderr, env=env, text=True
        )
    running = JavaProducer(proc)
    try:

        def sent() -> list[str] | None:
            lines = [ln for ln in out.read_text().splitlines() if ln.startswith("sent ")]
            return lines[0].split() if lines else None

        words = wait_for(
            sent,
            SENT_SECONDS,
            "the Java producer's 'sent' line",
            interval=0.2,
            give_up=lambda: proc.poll() is not None,
            context=lambda: log.read_text(errors="replace")[-2000:],
        )
        running.acknowledged, running.failed = int(words[1]), int(words[2])
        yield running
    finally:
        stop_process(proc, 10)
        if proc.stdin is not None:
            proc.stdin.close()
