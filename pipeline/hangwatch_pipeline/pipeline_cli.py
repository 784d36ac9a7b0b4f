"""`hangwatch pipeline run|verify`: the reference PySpark pipeline and its read-back check.

`run` validates every option first (`run_options`: one-line error, exit 3, before any
JVM starts), then imports pyspark (through `hangwatch_pipeline.job`) and runs the job
on a local or local-cluster master: a progress line every few seconds on stderr and a
summary on stdout (exit 0 only if every event was sent and acknowledged). `verify`
reads the topic back with a plain consumer (`hangwatch_pipeline.verify`) and exits 1
if any event of the run is missing. pyspark is imported only inside `run`: the
wrapper package is used where pyspark is absent.
"""

from __future__ import annotations

import argparse
import json
import math
import sys

from hangwatch.errors import UsageError
from hangwatch.properties import parse_assignments
from hangwatch_pipeline import spark_kafka
from hangwatch_pipeline.run_options import (
    DEFAULT_MASTER,
    SINK_WRAPPER,
    add_run_arguments,
    parse_bootstrap,
    parse_topic,
    retries_disabled,
    run_options,
)
from hangwatch_pipeline.verify import verify


def register(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="pipeline_command", metavar="ACTION", required=True)
    run_parser = sub.add_parser(
        "run",
        help="generate events and write them to Kafka from Spark tasks",
        description="Run the reference PySpark pipeline: events -> enrich -> Kafka, "
        "through the hangwatch producer wrapper (at-least-once per task), or through Spark's "
        "own Kafka sink (--sink connector, connector-streaming).",
    )
    add_run_arguments(run_parser)
    run_parser.set_defaults(master=DEFAULT_MASTER)
    check = sub.add_parser(
        "verify",
        help="read the topic back and report missing and duplicate events",
        description="Read every partition of the topic to its end and check that every "
        "event of the run is there (missing: exit 1; duplicates are allowed).",
    )
    check.add_argument("--bootstrap", help="Kafka bootstrap servers, host:port,...")
    check.add_argument("--topic", help="the topic the pipeline wrote")
    check.add_argument("--expect", type=int, metavar="N", help="events the run sent (seq 0..N-1)")
    check.add_argument("--run-id", help="the run to check (default: the only run in the topic)")
    check.add_argument(
        "--timeout-seconds", type=float, default=60.0, help="give up reading after this (60)"
    )
    check.add_argument(
        "-X", dest="consumer_conf", action="append", default=[], metavar="KEY=VALUE",
        help="a librdkafka consumer property, e.g. security.protocol=SSL (repeatable)",
    )  # fmt: skip
    check.add_argument("--json", action="store_true", help="print the result as JSON")


def run(args: argparse.Namespace) -> int:
    if args.pipeline_command == "verify":
        return _verify(args)
    options = run_options(args)
    if retries_disabled(options.master):
        print(
            f"hangwatch pipeline: warning: --master {options.master} runs every task once; "
            "a task that fails is not retried (use local[N,F], e.g. local[4,4])",
            file=sys.stderr,
        )
    if options.sink != SINK_WRAPPER:
        spark_kafka.prerequisites()  # pyspark's version, Java, the jars: before any import
    try:
        from hangwatch_pipeline import job  # noqa: PLC0415 - pyspark only when running
    except ModuleNotFoundError as exc:
        raise UsageError(
            f"the pipeline needs pyspark ({exc.name} not found): pip install 'hangwatch[spark]'"
        ) from None
    return job.execute(options, json_output=args.json, quiet=True)


def _verify(args: argparse.Namespace) -> int:
    bootstrap = parse_bootstrap(args.bootstrap)
    topic = parse_topic(args.topic)
    if args.expect is None:
        raise UsageError("--expect N is required (the number of events the run sent)")
    if args.expect < 0:
        raise UsageError(f"--expect must be a number of events >= 0, got {args.expect}")
    if not (math.isfinite(args.timeout_seconds) and args.timeout_seconds > 0):
        raise UsageError(f"--timeout-seconds must be > 0, got {args.timeout_seconds}")
    consumer_conf = parse_assignments(args.consumer_conf, strip_values=True)
    result = verify(bootstrap, topic, args.expect, args.run_id, args.timeout_seconds, consumer_conf)
    if args.json:
        print(json.dumps(result.as_json(), indent=2))
    else:
        print(result.render())
    return result.exit_code
