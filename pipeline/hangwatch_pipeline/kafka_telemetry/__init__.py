"""hangwatch's telemetry for the Java Kafka client: the jar, and how Spark's sink loads it.

`HangwatchTelemetry.java` (beside this module; its header says what it records) makes
Spark's own Kafka sink, or any JVM producer, write the telemetry document the sidecar
reads (docs/telemetry.md): records sent, acknowledged and failed with the Kafka error each
failure names, batches the broker refused as too large and the client split, and the
throttle times a broker's quota gave it. It is compiled for Java 8 (Spark 3.5 executors
may run Java 8; Spark 4 runs Java 17) against the connector's own `kafka-clients`
(`hangwatch.java_build.java_jar`), cached under `~/.cache/hangwatch/kafka-telemetry/`.

A Spark job hands the jar to its executors (`spark.jars`, `--jars`, or the executor
image's jars directory) and names the class in two of the sink's options, `SINK_OPTIONS`:
`kafka.interceptor.classes` (the counts and errors) and `kafka.metric.reporters` (splits
and throttles). The executor's environment names the directory
(`HANGWATCH_TELEMETRY_DIR`, which the webhook sets in an injected pod).

    python -m hangwatch_pipeline.kafka_telemetry    # build (once) and print the jar's path
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from hangwatch.java_build import JavaJar
from hangwatch_pipeline import spark_kafka

CLASS_NAME = "dev.hangwatch.kafka.HangwatchTelemetry"
JAR = JavaJar(
    source=Path(__file__).with_name("HangwatchTelemetry.java"),
    jar_name="hangwatch-kafka-telemetry.jar",
    cache_env="HANGWATCH_KAFKA_TELEMETRY_CACHE",
    cache_dir="kafka-telemetry",
    java_release="8",  # the oldest Java a supported Spark line's executors run
    needed_by="hangwatch's Kafka telemetry for the Java client",
)
SINK_OPTIONS: Mapping[str, str] = {
    "kafka.interceptor.classes": CLASS_NAME,
    "kafka.metric.reporters": CLASS_NAME,
}
"""The options of Spark's Kafka sink that load the class in both its roles."""


def with_telemetry(options: Mapping[str, str]) -> dict[str, str]:
    """The sink's options with the class once at the end of `SINK_OPTIONS`' lists (a job's
    own interceptors and reporters stay, first; the class listed twice would count every
    record twice: the client makes an instance per entry)."""
    out = dict(options)
    for key, name in SINK_OPTIONS.items():
        listed = [c.strip() for c in out.get(key, "").split(",") if c.strip()]
        out[key] = ",".join([*(c for c in listed if c != name), name])
    return out


def telemetry_jar(connector_jars: Sequence[Path]) -> Path:
    """The built jar (building it first when it is not cached)."""
    return JAR.build(connector_jars)


def main() -> int:
    """Build (once) and print the jar's path."""
    return JAR.main("kafka-telemetry", spark_kafka.jars)
