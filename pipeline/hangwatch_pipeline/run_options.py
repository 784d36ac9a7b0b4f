"""Options of the reference pipeline, parsed and checked before Spark starts.

`hangwatch pipeline run` (`pipeline_cli`) and the spark-submit entry point (`job.main`)
share `add_run_arguments` and `run_options`. Every check that can fail is done here,
on the driver, before a JVM is launched: a bad bootstrap list, topic, rate, duration,
event count, master URL or producer property becomes one `UsageError` line (exit 3),
never a Spark stack trace minutes later. Pure apart from reading the environment.
"""

from __future__ import annotations

import argparse
import glob
import math
import os
import re
import secrets
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from hangwatch import rdkafka_conf
from hangwatch.errors import UsageError
from hangwatch.properties import parse_assignments
from hangwatch_pipeline.kafka_telemetry import with_telemetry
from hangwatch_pipeline.spark_kafka import check_sink_options
from hangwatch_producer.settings import TELEMETRY_DIR_ENV, ProducerSettings, build_config

DEFAULT_EVENTS = 100_000
"""Events generated when neither --events, --duration nor --input is given."""

DEFAULT_MASTER = "local[*,4]"
"""All local cores and up to 4 attempts per task: a task whose messages were not all
acknowledged is retried, as on a cluster (plain `local[N]` never retries a task)."""

SHORT_RUN_JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
"""Java options for Spark JVMs that live a minute or two on a small machine: the C1
compiler alone (no C2 compiling Spark's code in the background) and the serial
collector (no GC threads per core). The demo's local cluster and the test suite's Spark
applications run with them (`short_run_conf`); a job submitted for real keeps Spark's
and the JVM's defaults. Measured side by side on 2 cores (docs/testing-tiers.md): the
same Spark tests and demo scenarios used 26-37 % less CPU and 12-15 % less time."""


def short_run_conf() -> dict[str, str]:
    """`SHORT_RUN_JVM_OPTIONS` for the driver and the executors, as Spark conf: the
    `defaultJavaOptions` an administrator sets, which a job's own `extraJavaOptions`
    adds to rather than replaces."""
    return {
        "spark.driver.defaultJavaOptions": SHORT_RUN_JVM_OPTIONS,
        "spark.executor.defaultJavaOptions": SHORT_RUN_JVM_OPTIONS,
    }


TOPIC_PATTERN = re.compile(r"^[A-Za-z0-9._-]{1,249}$")
_HOST_PORT = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+):(\d{1,5})$")
_RATE = re.compile(r"^(\d+(?:\.\d*)?|\.\d+)\s*([kKmM]?)\s*(?:/\s*s(?:ec)?)?$")
_DURATION = re.compile(r"^(\d+(?:\.\d*)?|\.\d+)\s*(ms|s|m|h)?$")
_MULTIPLIERS: dict[str | None, float] = {"": 1.0, "k": 1e3, "K": 1e3, "m": 1e6, "M": 1e6}
_DURATION_UNITS = {None: 1.0, "ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
_MASTERS = (
    re.compile(r"^local$"),
    re.compile(r"^local\[(\*|[1-9]\d*)\]$"),
    re.compile(r"^local\[(\*|[1-9]\d*),\s*([1-9]\d*)\]$"),
    re.compile(r"^local-cluster\[\s*[1-9]\d*\s*,\s*[1-9]\d*\s*,\s*[1-9]\d*\s*\]$"),
    re.compile(r"^spark://[^\s/]+:\d+(,[^\s/]+:\d+)*$"),
    re.compile(r"^k8s://(https?://)?[^\s/]+(:\d+)?/?$"),
    re.compile(r"^yarn$"),
)
SINK_WRAPPER = "wrapper"
SINK_CONNECTOR = "connector"
SINK_CONNECTOR_STREAMING = "connector-streaming"
SINKS = (SINK_WRAPPER, SINK_CONNECTOR, SINK_CONNECTOR_STREAMING)
"""How tasks write: hangwatch's producer wrapper (librdkafka, telemetry), or Spark's own
Kafka data source (the JVM producer of spark-sql-kafka-0-10), batch or streaming."""

_RETRYLESS_LOCAL = re.compile(r"^local(\[(\*|\d+)\])?$")
_ENV_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


@dataclass(frozen=True)
class RunOptions:
    """Everything one pipeline run needs, validated."""

    bootstrap: str
    topic: str
    events: int | None
    """Events to generate; None when reading `input_path`."""
    rate_per_second: float | None = None
    """Overall send rate (split evenly over the partitions); None sends as fast as it can."""
    input_path: str | None = None
    input_format: str | None = None
    """`json` (JSON lines) or `csv` (with a header line), when reading files."""
    partitions: int | None = None
    """Spark partitions, i.e. tasks; None chooses (see `job.partition_count`)."""
    master: str | None = None
    """Spark master URL; None leaves it to spark-submit / the environment."""
    run_id: str = ""
    producer_conf: Mapping[str, str] = field(default_factory=dict)
    """librdkafka properties (`-X`), over hangwatch's defaults; bootstrap added by the job."""
    spark_conf: Mapping[str, str] = field(default_factory=dict)
    telemetry_dir: str | None = None
    """Passed to the tasks as HANGWATCH_TELEMETRY_DIR (spark.executorEnv); None leaves
    the executors' own environment alone (in Kubernetes the webhook sets it)."""
    progress_seconds: float = 5.0
    sink: str = SINK_WRAPPER
    """One of `SINKS`."""
    sink_options: Mapping[str, str] = field(default_factory=dict)
    """The Kafka data source's options (`--option kafka.acks=all`), connector sinks only."""
    kafka_telemetry: bool = False
    """`--kafka-telemetry`: hangwatch's telemetry in the connector sink's Java client (its
    class in `sink_options`; its jar in the session's when hangwatch starts it)."""
    checkpoint: str | None = None
    """The streaming query's checkpoint directory (connector-streaming; None: chosen)."""
    app_name: str = "hangwatch-pipeline"
    spark_log_level: str = "WARN"


def new_run_id(now: float | None = None) -> str:
    """`run-20260509T101500Z-3f2a`: sortable by start time, unique enough per topic."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(time.time() if now is None else now))
    return f"run-{stamp}-{secrets.token_hex(2)}"


def parse_bootstrap(text: str | None) -> str:
    """A `host:port,host:port` list, normalised; one-line error naming the bad entry."""
    entries = [e.strip() for e in (text or "").split(",") if e.strip()]
    if not entries:
        raise UsageError("--bootstrap is required (host:port,host:port,...)")
    for entry in entries:
        match = _HOST_PORT.match(entry)
        if match is None or not 0 < int(match.group(2)) < 65536:
            raise UsageError(f"--bootstrap entry {entry!r} is not host:port")
    return ",".join(entries)


def parse_topic(text: str | None) -> str:
    """A legal Kafka topic name."""
    topic = (text or "").strip()
    if not topic:
        raise UsageError("--topic must not be empty")
    if not TOPIC_PATTERN.match(topic) or topic in {".", ".."}:
        raise UsageError(
            f"--topic {topic!r} is not a valid Kafka topic name "
            "(letters, digits, '.', '_', '-'; at most 249)"
        )
    return topic


def _positive(
    text: str, pattern: re.Pattern[str], units: Mapping[str | None, float], wrong: str
) -> float:
    """`text` as `pattern` reads it (a number, then a unit of `units`): a finite number
    > 0 in the base unit; UsageError(`wrong`) otherwise."""
    match = pattern.match(text.strip())
    value = float(match.group(1)) * units[match.group(2)] if match else math.nan
    if not (math.isfinite(value) and value > 0):
        raise UsageError(wrong)
    return value


def parse_rate(text: str) -> float:
    """`5000/s`, `5000`, `5k/s`, `2.5k` -> events per second (> 0)."""
    wrong = f"--rate {text!r} is not a positive rate like 5000/s or 5k/s"
    return _positive(text, _RATE, _MULTIPLIERS, wrong)


def parse_duration(text: str) -> float:
    """`30`, `30s`, `1.5m`, `500ms`, `1h` -> seconds (> 0)."""
    wrong = f"--duration {text!r} is not a positive duration like 30s or 2m"
    return _positive(text, _DURATION, _DURATION_UNITS, wrong)


def parse_master(text: str | None) -> str | None:
    """A Spark master URL hangwatch knows, or None (left to spark-submit)."""
    if text is None:
        return None
    master = text.strip()
    if not any(p.match(master) for p in _MASTERS):
        raise UsageError(
            f"unknown --master {text!r} (use local[N,F], local-cluster[N,CORES,MB], "
            "spark://HOST:PORT, k8s://URL or yarn)"
        )
    return master


def retries_disabled(master: str | None) -> bool:
    """True for `local` and `local[N]`: Spark runs each task once, never retrying it."""
    return master is not None and bool(_RETRYLESS_LOCAL.match(master))


def parse_spark_conf(items: Sequence[str]) -> dict[str, str]:
    """`--conf key=value` items as a dict (a later one wins)."""
    conf: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip().startswith("spark."):
            raise UsageError(f"--conf {item!r} is not spark.property=value")
        conf[key.strip()] = value.strip()
    return conf


def expand_environment(conf: Mapping[str, str], environ: Mapping[str, str]) -> dict[str, str]:
    """Property values with every `${NAME}` replaced from `environ`.

    Tasks call this with their own environment, so a secret (`-X
    sasl.password=${KAFKA_SASL_PASSWORD}`, the variable filled from a Kubernetes Secret
    in the executor pod) never passes through the driver or the task closure.
    """

    def value(prop: str, text: str) -> str:
        def lookup(match: re.Match[str]) -> str:
            name = match.group(1)
            if name not in environ:
                raise UsageError(f"-X {prop} refers to ${{{name}}}, which is not set here")
            return environ[name]

        return _ENV_REFERENCE.sub(lookup, text)

    return {prop: value(prop, text) for prop, text in conf.items()}


def check_producer_conf(bootstrap: str, producer_conf: Mapping[str, str]) -> None:
    """Refuse what the wrapper or librdkafka would refuse in every task, now.

    Values holding `${NAME}` are resolved in the tasks (`expand_environment`) and only
    checked there."""
    if "bootstrap.servers" in producer_conf or "metadata.broker.list" in producer_conf:
        raise UsageError("give the brokers with --bootstrap, not -X bootstrap.servers")
    literal = {k: v for k, v in producer_conf.items() if not _ENV_REFERENCE.search(v)}
    conf = {"bootstrap.servers": bootstrap, **literal}
    build_config(conf, ProducerSettings(), telemetry_on=False, client_id="hangwatch-check")
    rdkafka_conf.validate(conf)


def add_run_arguments(parser: argparse.ArgumentParser, *, with_master: bool = True) -> None:
    """The arguments of a pipeline run (shared by the CLI and spark-submit's entry)."""
    parser.add_argument("--bootstrap", help="Kafka bootstrap servers, host:port,...")
    parser.add_argument("--topic", help="topic to write the events to")
    source = parser.add_argument_group("what to send (default: --events 100000)")
    source.add_argument("--events", type=int, metavar="N", help="generate N events")
    source.add_argument("--rate", metavar="R/s", help="overall send rate, e.g. 5000/s or 5k/s")
    source.add_argument("--duration", metavar="S", help="with --rate: run S (30s, 2m); N = R x S")
    source.add_argument("--input", metavar="PATH", help="read JSON lines or CSV files instead")
    source.add_argument(
        "--input-format", choices=("json", "csv"), help="default: from the file extension"
    )
    spark = parser.add_argument_group("Spark")
    if with_master:
        spark.add_argument("--master", help=f"Spark master (default {DEFAULT_MASTER})")
    spark.add_argument("--partitions", type=int, metavar="N", help="tasks (default: chosen)")
    spark.add_argument(
        "--conf", dest="spark_conf", action="append", default=[], metavar="KEY=VALUE",
        help="a Spark property (repeatable)",
    )  # fmt: skip
    spark.add_argument("--spark-log-level", default="WARN", help="Spark's log level (WARN)")
    parser.add_argument(
        "-X", dest="producer_conf", action="append", default=[], metavar="KEY=VALUE",
        help="a librdkafka producer property, e.g. message.timeout.ms=30000 (repeatable); "
        "${NAME} in a value is read from the executor's environment",
    )  # fmt: skip
    sink = parser.add_argument_group("sink")
    sink.add_argument(
        "--sink", choices=SINKS, default=SINK_WRAPPER,
        help="wrapper: hangwatch's producer wrapper (default); connector: Spark's Kafka data "
        "source, df.write.format('kafka'); connector-streaming: writeStream.format('kafka') "
        "with a checkpoint",
    )  # fmt: skip
    sink.add_argument(
        "--option", dest="sink_options", action="append", default=[], metavar="KEY=VALUE",
        help="a Kafka data source option of the connector sinks, e.g. kafka.acks=all, "
        "kafka.delivery.timeout.ms=30000, kafka.max.block.ms=10000 (repeatable)",
    )  # fmt: skip
    sink.add_argument(
        "--kafka-telemetry", action="store_true",
        help="connector sinks: load hangwatch's telemetry into the sink's Java client, so the "
        "sidecar names its refusals and throttles (its jar is built here and added when "
        "hangwatch starts the session; under spark-submit pass it with --jars)",
    )  # fmt: skip
    sink.add_argument(
        "--checkpoint", metavar="DIR",
        help="connector-streaming: the query's checkpoint (run again with the same --run-id "
        "and --checkpoint to resume; default: under the temporary directory, by run id)",
    )  # fmt: skip
    parser.add_argument("--run-id", help="id of this run in every event (default: generated)")
    parser.add_argument(
        "--telemetry-dir",
        help=f"HANGWATCH_TELEMETRY_DIR for the tasks (default: ${TELEMETRY_DIR_ENV} if set)",
    )
    parser.add_argument(
        "--progress-seconds", type=float, default=5.0, help="progress line period (5)"
    )
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")


def run_options(args: argparse.Namespace, environ: Mapping[str, str] | None = None) -> RunOptions:
    """Validated options from parsed arguments; `UsageError` names the first problem."""
    env = os.environ if environ is None else environ
    bootstrap = parse_bootstrap(args.bootstrap)
    topic = parse_topic(args.topic)
    events, rate = _source(args)
    input_format = _input_format(args.input, args.input_format)
    if args.partitions is not None and args.partitions < 1:
        raise UsageError(f"--partitions must be >= 1, got {args.partitions}")
    if not (math.isfinite(args.progress_seconds) and args.progress_seconds > 0):
        raise UsageError(f"--progress-seconds must be > 0, got {args.progress_seconds}")
    run_id = (args.run_id or new_run_id()).strip()
    if not re.fullmatch(r"[A-Za-z0-9._:-]{1,100}", run_id):
        raise UsageError(f"--run-id {args.run_id!r} must be 1-100 of [A-Za-z0-9._:-]")
    producer_conf = parse_assignments(args.producer_conf, strip_values=True)
    check_producer_conf(bootstrap, producer_conf)
    sink = getattr(args, "sink", SINK_WRAPPER)
    sink_options = parse_assignments(getattr(args, "sink_options", []), strip_values=True)
    _check_sink(sink, producer_conf, sink_options, args)
    telemetry = bool(getattr(args, "kafka_telemetry", False))
    if telemetry:
        sink_options = with_telemetry(sink_options)
    master = parse_master(getattr(args, "master", None))
    return RunOptions(
        bootstrap=bootstrap,
        topic=topic,
        events=events,
        rate_per_second=rate,
        input_path=args.input,
        input_format=input_format,
        partitions=args.partitions,
        master=master,
        run_id=run_id,
        producer_conf=producer_conf,
        spark_conf=parse_spark_conf(args.spark_conf),
        telemetry_dir=args.telemetry_dir or env.get(TELEMETRY_DIR_ENV) or None,
        progress_seconds=args.progress_seconds,
        sink=sink,
        sink_options=sink_options,
        kafka_telemetry=telemetry,
        checkpoint=getattr(args, "checkpoint", None),
        spark_log_level=_log_level(args.spark_log_level),
    )


def _check_sink(
    sink: str,
    producer_conf: Mapping[str, str],
    sink_options: Mapping[str, str],
    args: argparse.Namespace,
) -> None:
    if sink == SINK_WRAPPER:
        if sink_options:
            raise UsageError("--option sets the connector sinks' producer: use -X with the wrapper")
        if getattr(args, "kafka_telemetry", False):
            raise UsageError(
                "--kafka-telemetry is for the connector sinks: the wrapper writes its own"
            )
        if getattr(args, "checkpoint", None):
            raise UsageError("--checkpoint is for --sink connector-streaming")
        return
    if producer_conf:
        raise UsageError(
            f"-X sets librdkafka properties of the wrapper; --sink {sink} writes with Spark's "
            "Java producer: use --option kafka.KEY=VALUE"
        )
    check_sink_options(sink_options)
    if sink == SINK_CONNECTOR_STREAMING:
        if args.input is not None:
            raise UsageError("--sink connector-streaming generates its events: drop --input")
        if args.rate is not None:
            raise UsageError("--sink connector-streaming sends as fast as Spark can: drop --rate")
    elif getattr(args, "checkpoint", None):
        raise UsageError("--checkpoint is for --sink connector-streaming")


def _source(args: argparse.Namespace) -> tuple[int | None, float | None]:
    rate = parse_rate(args.rate) if args.rate is not None else None
    duration = parse_duration(args.duration) if args.duration is not None else None
    if duration is not None and rate is None:
        raise UsageError("--duration needs --rate (events = rate x duration)")
    if args.input is not None:
        if args.events is not None or duration is not None:
            raise UsageError("--input reads its events from files: drop --events/--duration")
        return None, rate
    if args.events is not None and duration is not None:
        raise UsageError("give --events or --rate with --duration, not both")
    if args.events is not None and args.events < 1:
        raise UsageError(f"--events must be a positive number, got {args.events}")
    if rate is not None and duration is not None:
        return max(1, round(rate * duration)), rate
    return (args.events if args.events is not None else DEFAULT_EVENTS), rate


def _input_format(path: str | None, given: str | None) -> str | None:
    if path is None:
        if given is not None:
            raise UsageError("--input-format needs --input")
        return None
    if not path.strip():
        raise UsageError("--input must not be empty")
    if "://" not in path and not glob.glob(path):
        raise UsageError(f"--input {path!r} matches no file")
    if given is not None:
        return given
    name = path.rstrip("/").lower()
    if name.endswith((".jsonl", ".json", ".ndjson")):
        return "json"
    if name.endswith(".csv"):
        return "csv"
    raise UsageError(f"cannot tell the format of --input {path!r}: add --input-format json|csv")


def _log_level(text: str) -> str:
    level = text.strip().upper()
    if level not in {"ALL", "DEBUG", "ERROR", "FATAL", "INFO", "OFF", "TRACE", "WARN"}:
        raise UsageError(f"--spark-log-level {text!r} is not a log4j level (e.g. WARN, ERROR)")
    return level
