"""The reference PySpark pipeline: generate (or read) events, enrich them, write them to Kafka.

Run by `hangwatch pipeline run` (local and local-cluster masters, see `pipeline_cli`)
or on a cluster by spark-submit, this file being the application:

    spark-submit --master k8s://https://api:6443 --deploy-mode cluster ... \\
        local:///opt/hangwatch/job.py --bootstrap kafka-0:9092 --topic events --events 1000000

The job is the session and the sink table (`SINK_JOBS`): the run's events and tasks
come from `workload` (`sc.range`, or `sc.textFile` + `zipWithIndex`, -> `events` ->
partitions), and the `--sink` decides who writes them: `wrapper_sink` (each task
through `hangwatch_producer.producer`; a task fails unless every message was
acknowledged and Spark runs it again: at-least-once, duplicates possible, nothing
lost, which `hangwatch pipeline verify` checks) or `connector_sink` (Spark's own Kafka
sink). Accumulators count what succeeded tasks sent and got acknowledged; the status
tracker counts failed attempts (`run_report`). The names tests and the demo use from
here (`write_partition`, `TaskPlan`, `JobAccumulators`, ...) stay importable from this
module (`__all__`).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from typing import IO

from pyspark.sql import SparkSession

from hangwatch.contracts import ExitCode
from hangwatch.errors import HangwatchError
from hangwatch_pipeline import kafka_telemetry, spark_kafka
from hangwatch_pipeline.connector_sink import run_connector
from hangwatch_pipeline.run_options import (
    SINK_CONNECTOR,
    SINK_CONNECTOR_STREAMING,
    SINK_WRAPPER,
    RunOptions,
    add_run_arguments,
    run_options,
)
from hangwatch_pipeline.run_report import Summary
from hangwatch_pipeline.workload import (
    APP_ID_PROPERTY,
    PACED_TASK_SECONDS,
    JobAccumulators,
    generated_event,
    task_rate,
)
from hangwatch_pipeline.wrapper_sink import (
    PartitionWriter,
    TaskPlan,
    run_wrapper,
    write_partition,
)
from hangwatch_producer.settings import TELEMETRY_DIR_ENV

__all__ = [
    "APP_ID_PROPERTY",
    "PACED_TASK_SECONDS",
    "QUIETED_LOGGERS",
    "SINK_JOBS",
    "JobAccumulators",
    "PartitionWriter",
    "TaskPlan",
    "execute",
    "generated_event",
    "main",
    "quiet_task_failure_logs",
    "run_pipeline",
    "session_conf",
    "spark_session",
    "task_rate",
    "write_partition",
]

QUIETED_LOGGERS = (
    "org.apache.spark.executor.Executor",
    "org.apache.spark.scheduler.TaskSetManager",
)
"""Spark loggers that print a whole Python traceback per failed task attempt; the task
itself prints one line saying why (`write_partition`)."""


SINK_JOBS: dict[str, Callable[[SparkSession, RunOptions, IO[str] | None], Summary]] = {
    SINK_WRAPPER: run_wrapper,
    SINK_CONNECTOR: run_connector,
    SINK_CONNECTOR_STREAMING: run_connector,
}
"""Each `--sink` and the module that runs the job for it."""


def run_pipeline(
    spark: SparkSession,
    options: RunOptions,
    progress: IO[str] | None = None,
    task: PartitionWriter = write_partition,
) -> Summary:
    """Run the job on `spark` with the run's sink (`SINK_JOBS`); progress lines to `progress`
    (None: silent). A job that fails (a task used up its attempts) is reported in the
    summary's `error`. `task` writes each partition of the wrapper's sink (`hangwatch
    demo` wraps `write_partition` to replay seed S4); the connector sinks run Spark's
    Kafka sink (no `task` of hangwatch's)."""
    if options.sink == SINK_WRAPPER:
        return run_wrapper(spark, options, progress, task)
    return SINK_JOBS[options.sink](spark, options, progress)


def session_conf(options: RunOptions) -> dict[str, str]:
    """Spark properties of the run's session (the user's `--conf` win)."""
    # Progress comes from the status store: write task starts to it at once (the
    # default batches them per 100 ms, which can hide a started task for seconds).
    conf = {"spark.ui.showConsoleProgress": "false", "spark.ui.liveUpdate.period": "0"}
    if options.master is not None and options.master.startswith("local"):
        conf["spark.ui.enabled"] = "false"
        conf["spark.pyspark.python"] = os.environ.get("PYSPARK_PYTHON") or sys.executable
    if options.telemetry_dir is not None:
        conf[f"spark.executorEnv.{TELEMETRY_DIR_ENV}"] = options.telemetry_dir
    # The connector's jars, checked (pyspark, Java, the cache) before any JVM starts,
    # when hangwatch starts the session; under spark-submit (no master of ours) they come
    # with spark-submit's --jars or the image, at the cluster's Spark version.
    ours = spark_kafka.prerequisites() if _loads_connector(options) else {}
    if ours and options.kafka_telemetry:
        jar = kafka_telemetry.telemetry_jar(spark_kafka.jars())
        ours["spark.jars"] = f"{ours['spark.jars']},{jar}"
    conf.update(ours)
    conf.update(options.spark_conf)
    if ours and "spark.jars" in options.spark_conf:
        conf["spark.jars"] = f"{ours['spark.jars']},{options.spark_conf['spark.jars']}"
    return conf


def _loads_connector(options: RunOptions) -> bool:
    return options.sink != SINK_WRAPPER and options.master is not None


def spark_session(options: RunOptions) -> SparkSession:
    """A session for the run: `options.master`, or the one spark-submit configured.
    Under spark-submit the application keeps the name it was submitted with (`--name`):
    on Kubernetes the executors' `spark-app-name` label comes from it, and that is what
    a ProducerHealthPolicy's selector matches (examples/policy-spark-executors.yaml)."""
    conf = session_conf(options)
    if "spark.pyspark.python" in conf:
        os.environ.setdefault("PYSPARK_PYTHON", conf["spark.pyspark.python"])
    builder = SparkSession.builder
    if options.master is not None:
        builder = builder.master(options.master).appName(options.app_name)
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(options.spark_log_level)
    return spark


def quiet_task_failure_logs(spark: SparkSession) -> None:
    """Silence Spark's per-attempt tracebacks (`QUIETED_LOGGERS`) in local runs."""
    jvm = spark.sparkContext._jvm
    if jvm is None:
        return
    level = jvm.org.apache.logging.log4j.Level.toLevel("OFF")
    for name in QUIETED_LOGGERS:
        jvm.org.apache.logging.log4j.core.config.Configurator.setLevel(name, level)


def execute(
    options: RunOptions,
    *,
    json_output: bool = False,
    quiet: bool = False,
    progress: IO[str] | None = sys.stderr,
) -> int:
    """Start a session, run, print the summary on stdout; exit code 0 only if all acknowledged.
    Progress lines go to `progress` (None: none)."""
    spark = spark_session(options)
    try:
        if quiet and options.spark_log_level not in {"ALL", "TRACE", "DEBUG", "INFO"}:
            quiet_task_failure_logs(spark)
        summary = run_pipeline(spark, options, progress)
    finally:
        spark.stop()
    if json_output:
        print(json.dumps(summary.as_json(), indent=2))
    else:
        print(summary.render())
    return ExitCode.OK if summary.ok else ExitCode.DEGRADED


def main(argv: list[str] | None = None) -> int:
    """spark-submit's entry: `job.py --bootstrap B --topic T [--events N | ...]`."""
    parser = argparse.ArgumentParser(
        prog="job.py", description="hangwatch reference pipeline (master from spark-submit)"
    )
    add_run_arguments(parser, with_master=False)
    args = parser.parse_args(argv)
    try:
        # spark-submit merges the Python driver's stderr into its stdout: with --json the
        # summary must be all of stdout, so the progress lines stay off.
        progress = None if args.json else sys.stderr
        return execute(run_options(args), json_output=args.json, progress=progress)
    except HangwatchError as exc:
        print(f"job.py: error: {exc}", file=sys.stderr)
        return exc.exit_code


if __name__ == "__main__":
    # Run the installed module's main so that tasks unpickle functions by reference.
    from hangwatch_pipeline.job import main as installed_main

    sys.exit(installed_main())
