"""The demo's wedgeable Kafka interceptor for Spark's Kafka sink: built once, cached by content.

`WedgeInterceptor.java` (beside this module; its header says what it does) is compiled
with the machine's `javac` against the connector's own `kafka-clients` jar
(`hangwatch_pipeline.spark_kafka.jars`) by `hangwatch.java_build.java_jar`, cached under
`~/.cache/hangwatch/demo-interceptor/<key>/` (the key hashes the source, the toolchain and
the kafka-clients jar's name). The demo hands the jar to Spark through
`spark.jars`; a scenario loads the class through the connector's own
`kafka.interceptor.classes` option, as a user's monitoring interceptor would be loaded.

A missing `javac` or a failed compile is one `UsageError` line naming what to do.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from hangwatch.java_build import JavaJar
from hangwatch_pipeline import spark_kafka

CLASS_NAME = "dev.hangwatch.demo.WedgeInterceptor"
"""What `kafka.interceptor.classes` names."""
JAR = JavaJar(
    source=Path(__file__).with_name("WedgeInterceptor.java"),
    jar_name="wedge-interceptor.jar",
    cache_env="HANGWATCH_DEMO_INTERCEPTOR_CACHE",
    cache_dir="demo-interceptor",
    java_release="17",  # Spark 4 runs on Java 17 and later
    needed_by="the demo's Spark Kafka sink scenarios' interceptor",
)
CACHE_ENV = JAR.cache_env
"""Overrides the cache's root (default `~/.cache/hangwatch/demo-interceptor`)."""


def interceptor_jar(connector_jars: Sequence[Path]) -> Path:
    """The built interceptor's jar (building it first when it is not cached)."""
    return JAR.build(connector_jars)


def main() -> int:
    """`python3 -m hangwatch_demo.interceptor`: build (once) and print the jar's path (the
    node tier's Spark image carries it, scripts/build-spark-image.sh)."""
    return JAR.main("demo-interceptor", spark_kafka.jars)


if __name__ == "__main__":
    sys.exit(main())
