"""Spark's own Kafka sink writing in a loop from a real executor: one of the refusal controls.

    python -m hangwatch_testing.clients.spark_producer --bootstrap B --topic T --work DIR
        [--rows 20] [--value-bytes N] [--pause-seconds 0.5] [--telemetry-dir DIR]
        [-X key=value ...]

Starts `local-cluster[1,1,1024]` (`hangwatch_testing.spark_driver`: one executor, a
separate JVM, as on Kubernetes) with the Kafka connector's jars (`spark-sql-kafka-0-10`),
prints `ready <ui-url> <application-id> <executor-id> <executor-pid>` once the executor
has registered, then writes a DataFrame of `--rows` rows (one partition, values padded
to `--value-bytes`) with `df.write.format("kafka")` again and again, `--pause-seconds`
apart, until SIGTERM: `-X` are the Java producer's properties (`kafka.<key>` options of
the sink: a SASL login, a client.id a quota names, delivery.timeout.ms);
`--telemetry-dir` loads hangwatch's reporter into the sink's Java client
(`hangwatch_pipeline.kafka_telemetry`: its jar in `spark.jars`, its class in the sink's
options) and names the directory in the executor's environment. Prints, flushed:
`ok <rows delivered>` after each write that succeeded; `job-failed <the job's error, one
line>` after each that failed (Spark retried its task spark.task.maxFailures times);
`error <exception: message>` once for each failed task attempt the driver's REST API
reports (what the sidecar's Spark view reads, read here on its own); `throttled <ms>` for
each throttle time the broker gave the executor's producer (its NetworkClient's own log
line, logged at TRACE into the executor's `kafka-throttle.log` under `--work`). On
SIGTERM the running job is cancelled and the session and its JVMs stopped.
"""

from __future__ import annotations

import argparse
import re
import signal
import sys
import threading
from pathlib import Path
from typing import Any

from hangwatch.properties import parse_assignments
from hangwatch_demo.spark_cluster import executors_of
from hangwatch_pipeline import kafka_telemetry, spark_kafka
from hangwatch_sidecar.spark.client import DriverClient, DriverError, DriverReader
from hangwatch_testing.spark_driver import local_cluster_driver

EXECUTOR_LOG4J = """\
rootLogger.level = warn
rootLogger.appenderRef.err.ref = err
appender.err.type = Console
appender.err.name = err
appender.err.target = SYSTEM_ERR
appender.err.layout.type = PatternLayout
appender.err.layout.pattern = %d{{HH:mm:ss.SSS}} %p %c{{1}}: %m%n
appender.throttle.type = File
appender.throttle.name = throttle
appender.throttle.fileName = {path}
appender.throttle.layout.type = PatternLayout
appender.throttle.layout.pattern = %m%n
appender.throttle.filter.only.type = RegexFilter
appender.throttle.filter.only.regex = .*is throttled for.*
appender.throttle.filter.only.onMatch = ACCEPT
appender.throttle.filter.only.onMismatch = DENY
logger.network.name = org.apache.kafka.clients.NetworkClient
logger.network.level = trace
logger.network.additivity = false
logger.network.appenderRef.throttle.ref = throttle
"""
"""The executor's log4j2: warnings to its stderr, the Java client's throttle lines to a file."""
THROTTLED = re.compile(r"is throttled for (\d+) ms")


def _say(line: str) -> None:
    print(line.replace("\n", " ")[:2000], flush=True)


def _one_line(exc: BaseException) -> str:
    """The job's error in one line: the Java exception's text (its cause named inside)."""
    java = getattr(exc, "java_exception", None)
    text = str(java) if java is not None else f"{type(exc).__name__}: {exc}"
    return " ".join(part.strip() for part in text.splitlines() if not part.startswith("\tat "))


def _watch_driver(reader: DriverReader, throttle_log: Path, stop: threading.Event) -> None:
    """Prints each new failed task attempt and each throttle, every half second."""
    seen: set[int] = set()
    throttles = 0
    while not stop.wait(0.5):
        try:
            attempts = reader.read_failed_attempts()
        except DriverError:
            attempts = ()
        for attempt in sorted(attempts, key=lambda a: a.task_id):
            if attempt.task_id not in seen:
                seen.add(attempt.task_id)
                _say(f"error {attempt.label}: {attempt.error}")
        lines = (
            throttle_log.read_text(errors="replace").splitlines() if throttle_log.exists() else []
        )
        for line in lines[throttles:]:
            found = THROTTLED.search(line)
            if found:
                _say(f"throttled {found.group(1)}")
        throttles = len(lines)


def _write(spark: Any, args: Any, kafka: dict[str, str]) -> None:
    rows = spark.range(args.rows, numPartitions=1).selectExpr(
        "CAST(id AS STRING) AS key", f"rpad(CAST(id AS STRING), {args.value_bytes}, 'x') AS value"
    )
    writer = rows.write.format("kafka").option("kafka.bootstrap.servers", args.bootstrap)
    for key, value in kafka.items():
        writer = writer.option(f"kafka.{key}", value)
    if args.telemetry_dir is not None:
        for key, value in kafka_telemetry.SINK_OPTIONS.items():
            writer = writer.option(key, value)
    writer.option("topic", args.topic).save()


def _loop(spark: Any, args: Any, kafka: dict[str, str], stop: threading.Event) -> None:
    delivered = 0
    while not stop.is_set():
        try:
            _write(spark, args, kafka)
        except Exception as exc:  # noqa: BLE001 - py4j raises many kinds; each is reported
            if stop.is_set():
                return
            _say(f"job-failed {_one_line(exc)}")
        else:
            delivered += args.rows
            _say(f"ok {delivered}")
        stop.wait(args.pause_seconds)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--work", required=True, type=Path)
    parser.add_argument("--rows", type=int, default=20)
    parser.add_argument("--value-bytes", type=int, default=16)
    parser.add_argument("--pause-seconds", type=float, default=0.5)
    parser.add_argument("--telemetry-dir", type=Path, default=None)
    parser.add_argument("-X", dest="kafka", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args(argv)
    kafka = parse_assignments(args.kafka)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    work: Path = args.work
    throttle_log = work / "kafka-throttle.log"
    log4j = work / "log4j2-executor.properties"
    log4j.write_text(EXECUTOR_LOG4J.format(path=throttle_log))
    conf = {"spark.executor.extraJavaOptions": f"-Dlog4j2.configurationFile=file:{log4j}"}
    jars = spark_kafka.jars()
    if args.telemetry_dir is not None:
        jars = [*jars, kafka_telemetry.telemetry_jar(jars)]
        conf["spark.executorEnv.HANGWATCH_TELEMETRY_DIR"] = str(args.telemetry_dir)
    with local_cluster_driver(work, "hangwatch-refusal-spark", jars, conf, cores=1) as driver:
        (executor,) = [
            e
            for e in executors_of(driver.application_id, driver.work_root)
            if e.id == driver.executor_id
        ]
        _say(f"ready {driver.ui.url} {driver.application_id} {executor.id} {executor.pid}")
        reader = DriverReader(DriverClient(driver.ui, 10.0), driver.application_id, executor.id)
        watcher = threading.Thread(target=_watch_driver, args=(reader, throttle_log, stop))
        writer = threading.Thread(target=_loop, args=(driver.spark, args, kafka, stop))
        watcher.start()
        writer.start()
        while not stop.wait(0.5) and writer.is_alive():
            pass
        stop.set()
        driver.spark.sparkContext.cancelAllJobs()
        writer.join(60)
        watcher.join(10)
    return 0


if __name__ == "__main__":
    sys.exit(main())
