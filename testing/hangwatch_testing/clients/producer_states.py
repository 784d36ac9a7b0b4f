"""The Spark UDF that puts a real Java Kafka producer into the states Spark's view classifies.

`udf_jars(version, work)` compiles testing/clients/spark-producer-states against
pyspark's jars and kafka-clients `version` (resolved by hangwatch_testing.clients.build) and
returns the jars an application needs on `spark.jars`: the UDF's and that kafka-clients
jar (its compression libraries and slf4j are already among pyspark's). `states_frame`
is a DataFrame whose collection runs one task per state on the executor.
Used by scripts/record_thread_dumps.py (the fixtures) and the live Spark view test.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
from collections.abc import Sequence
from pathlib import Path

import pyspark
from pyspark.sql import DataFrame, SparkSession

from hangwatch_testing.clients.build import SOURCES as CLIENT_SOURCES
from hangwatch_testing.clients.build import built

SOURCES = CLIENT_SOURCES / "spark-producer-states"
UDF_CLASS = "dev.hangwatch.recording.ProducerStates"
STATES = ("callback", "flush", "metadata", "healthy")
"""One task each (see ProducerStates.java): the I/O thread of producer `s4-callback` in its
callback waiting for itself while a task fills its buffer; a task in that producer's
flush(); a task waiting for metadata; producer `healthy` at work."""
SPARK_KAFKA_CLIENTS = "3.9.2"
"""The kafka-clients version Spark's Kafka sink pins (spark-sql-kafka-0-10 4.2.0's parent
pom; the installed pyspark 4.3.0's own sink is not on Maven Central)."""


def udf_jars(version: str, work: Path) -> list[Path]:
    """[the UDF's jar, kafka-clients `version`'s jar], compiled/resolved when missing."""
    kafka = built(f"kafka-clients-{version}") / "lib" / f"kafka-clients-{version}.jar"
    spark_jars = Path(pyspark.__file__).resolve().parent / "jars"
    classes = work / f"producer-states-{version}"
    javac = shutil.which("javac")
    if javac is None:
        raise RuntimeError("javac is needed: scripts/setup.sh installs openjdk-17-jdk-headless")
    sources = [str(p) for p in sorted(SOURCES.glob("*.java"))]
    subprocess.run(
        [javac, "-nowarn", "-d", str(classes), "-cp", f"{spark_jars}/*:{kafka}", *sources],
        check=True, capture_output=True, timeout=240,
    )  # fmt: skip
    jar = work / f"producer-states-{version}.jar"
    subprocess.run(["jar", "cf", str(jar), "-C", str(classes), "."], check=True, timeout=60)
    return [jar, kafka]


def _nothing_listens() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"


def states_frame(
    spark: SparkSession, bootstrap: str, topic: str, states: Sequence[str] = STATES
) -> DataFrame:
    """A DataFrame whose collection runs one task per state (until its job is cancelled);
    `metadata` gets a bootstrap address nothing listens on."""
    spark.udf.registerJavaFunction("hw_state", UDF_CLASS, "string")
    dead = _nothing_listens()
    rows = [(f"{s}|{dead if s == 'metadata' else bootstrap}|{topic}",) for s in states]
    one_each = spark.sparkContext.parallelize(rows, len(rows))  # one task per row
    return spark.createDataFrame(one_each, "input string").selectExpr("hw_state(input)")
