"""Writes the cluster refuses, by a real producer, watched by a real sidecar, on Apache Kafka.

Issue 29's controls: refusals that live outside the client, which a restart cannot
clear, and a client quota that only slows the client down. `refusals_lab` starts one
3-broker Apache Kafka lab (the default 4.x) holding every cause at once (and issue 43's
topic whose `min.insync.replicas` equals its replication factor): a topic whose
`max.message.bytes` is 200, automatic topic creation off, a SASL/PLAIN user allowed to
write one topic and no other (StandardAuthorizer), and a `producer_byte_rate` quota on
one client id per producer kind (a quota's accounting is per client id: a producer
sharing one would inherit the throttle the one before it earned). `watch_refusal` runs
one producer through one `Refusal` - the hangwatch wrapper with its telemetry
(`hangwatch_demo.workload`), a plain confluent-kafka producer (`plain_producer`, no
telemetry) or Spark's own Kafka sink (`spark_producer`: a real `local-cluster` job
writing with `df.write.format("kafka")` from its executor JVM; `java_settings` spells the
refusal's properties for the Java client) - next to a real `hangwatch sidecar` process
probing the topic the producer writes, its socket view narrowed to the producer's
process (for Spark: the executor JVM, and Spark's view of that executor through the
driver's REST API, as the webhook sets it up), and records every verdict change with its
reasons from the start, the sidecar's last /status, and what the producer itself
reported (its errors, throttles, deliveries; for Spark each failed task attempt's
exception as the driver reports it). The watch runs until
`after_error_seconds` past the producer's first error (at least 3 stall periods: long
enough for any stall rule to fire), or, for the quota, until `quota_watch_seconds` past the
first throttle the producer reports.
Everything stops on every path.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hangwatch.child_processes import stop_process
from hangwatch_demo.harness import telemetry_docs
from hangwatch_demo.scenarios import Timing
from hangwatch_lab import Lab
from hangwatch_testing.clients.runs import SidecarProcess, SidecarTiming
from hangwatch_testing.waiting import wait_for

USER, PASSWORD = "writer", "writer-secret"
"""The lab's SASL user (a test credential of a throwaway lab)."""
SMALL_LIMIT = 200
"""`max.message.bytes` of the `small` topic (issue 29's case)."""
QUOTA_CLIENT = "slow"
QUOTA_BYTES_PER_SECOND = 2048
PRODUCER_KINDS = ("wrapper", "confluent-kafka")
"""The librdkafka producers, each its own process."""
SPARK = "spark"
"""Spark's own Kafka sink (`spark-sql-kafka-0-10`, the Java client) on a real executor."""
SPARK_TELEMETRY = "spark-telemetry"
"""Spark's own Kafka sink with hangwatch's reporter in its Java client
(`hangwatch_pipeline.kafka_telemetry`) writing the telemetry the sidecar reads."""
SPARK_KINDS = (SPARK, SPARK_TELEMETRY)
ALL_KINDS = (*PRODUCER_KINDS, *SPARK_KINDS)
SPARK_READY_SECONDS = 300.0
"""How long a Spark producer may take to start its JVMs and register its executor."""
SPARK_STOP_SECONDS = 60.0
"""How long a Spark producer may take to cancel its job and stop its JVMs on SIGTERM."""
RESTART_CLASS = frozenset({"producer_hung", "metadata_stale"})
"""The verdicts whose policy default is a restart."""


@dataclass(frozen=True)
class Refusal:
    """One control: where the producer writes, how, and what the cluster answers."""

    id: str
    topic: str
    error: str
    """The Kafka error name the producer meets (librdkafka's), or "" (the quota)."""
    kafka: tuple[str, ...] = ()
    """`-X` properties of the producer (its SASL login, its client.id); `{kind}` is
    replaced by the producer kind."""
    sasl: bool = False
    """The producer writes through the SASL listener."""
    value_bytes: int = 0
    rate: float = 50.0
    message_timeout_ms: int = 10_000
    java: str = ""
    """What the Java client's exception says (Spark's sink), or "" (the quota)."""
    spark_named: str = ""
    """What the sidecar must name for Spark's sink: the exception its failed task attempts
    carry, or Kafka's name of the error when no exception names it."""
    rows: int = 20
    """Rows of each of Spark's writes (one partition, one task)."""


def sasl_login(password: str = PASSWORD) -> dict[str, str]:
    """librdkafka's properties for the lab's SASL user logging in with `password`."""
    return {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": USER,
        "sasl.password": password,
    }


def _login(password: str) -> tuple[str, ...]:
    return tuple(f"{name}={value}" for name, value in sasl_login(password).items())


REFUSALS = {
    r.id: r
    for r in (
        Refusal(
            "too-large",
            "small",
            "MSG_SIZE_TOO_LARGE",
            value_bytes=1024,
            java="RecordTooLargeException",
            spark_named="RecordTooLargeException",
        ),
        Refusal(
            "not-authorized",
            "closed",
            "TOPIC_AUTHORIZATION_FAILED",
            _login(PASSWORD),
            sasl=True,
            java="TopicAuthorizationException",
            spark_named="TopicAuthorizationException",
        ),
        Refusal(
            "login-failed",
            "open",
            "_AUTHENTICATION",
            _login("wrong"),
            sasl=True,
            java="SaslAuthenticationException",
            spark_named="SaslAuthenticationException",
        ),
        # librdkafka fails a message to a topic that does not exist after
        # topic.metadata.propagation.max.ms (30 s, its default), when its own timeout
        # is longer (with a shorter one it is _MSG_TIMED_OUT, no cause named)
        # The Java client (Spark's sink) waits max.block.ms (60 s, its default) for the
        # topic's metadata, then fails the send with a TimeoutException naming no cause
        Refusal(
            "unknown-topic",
            "absent",
            "UNKNOWN_TOPIC",
            message_timeout_ms=60_000,
            java="not present in metadata",
            spark_named="UNKNOWN_TOPIC",
        ),
        Refusal(
            "quota",
            "open",
            "",
            (f"client.id={QUOTA_CLIENT}-{{kind}}",),
            value_bytes=200,
            rate=40.0,
            message_timeout_ms=300_000,
            rows=100,
        ),
    )
}


ISR_TOPIC = "isr"
"""Issue 43's topic: replication factor 3 and `min.insync.replicas` 3, so one broker
stopped leaves every partition's ISR below it (`hangwatch_testing.clients.unwritable`)."""
ISR_MIN_INSYNC = 3


@contextmanager
def refusals_lab() -> Iterator[Lab]:
    """One 3-broker Apache Kafka lab (the default version) holding every refusal's cause
    (every topic has three replicas; the ISR case's `ISR_TOPIC` needs all three in sync)."""
    with Lab(
        brokers=3,
        topics={"small": 1, "open": 1, "closed": 1, ISR_TOPIC: 3},
        engine="kafka",
        topic_configs={
            "small": {"max.message.bytes": str(SMALL_LIMIT)},
            ISR_TOPIC: {"min.insync.replicas": str(ISR_MIN_INSYNC)},
        },
        auto_create_topics=False,
        sasl_users={USER: PASSWORD},
    ) as lab:
        lab.grant(USER, "open")
        for kind in ALL_KINDS:  # one client id each: a quota's window is per client id
            lab.set_quota(f"{QUOTA_CLIENT}-{kind}", producer_byte_rate=QUOTA_BYTES_PER_SECOND)
        yield lab


@dataclass
class Watched:
    """What one control saw; times in seconds from the producer's start."""

    refusal: str
    producer: str
    engine: str
    changes: list[tuple[float, str, list[str]]] = field(default_factory=list)
    """(seconds, verdict, reasons) at every change of the sidecar's verdict, from its first."""
    producer_verdicts: set[str] = field(default_factory=set)
    """Every per-producer verdict the sidecar's /status showed."""
    final: dict[str, Any] = field(default_factory=dict)
    first_error_seconds: float | None = None
    errors: list[str] = field(default_factory=list)
    """The producer's own errors (failed deliveries and client-level errors)."""
    throttles: int = 0
    delivered_at_first_throttle: int = -1
    first_throttle_seconds: float | None = None
    delivered_at_end: int = 0
    seconds: float = 0.0

    @property
    def verdicts(self) -> set[str]:
        return {v for _, v, _ in self.changes} | self.producer_verdicts

    def sidecar_text(self) -> str:
        """Everything the sidecar said: its verdicts' reasons and evidence, as text."""
        return json.dumps(
            {
                "changes": self.changes,
                "latest": self.final.get("latest"),
                "producers": self.final.get("producers"),
            }
        )

    def describe(self) -> str:
        return (
            f"{self.refusal}/{self.producer} on {self.engine}: changes "
            f"{[(t, v, r[:2]) for t, v, r in self.changes]}, producer verdicts "
            f"{sorted(self.producer_verdicts)}, first error {self.first_error_seconds} s "
            f"{self.errors[:2]}, throttles {self.throttles} (first at {self.first_throttle_seconds}"
            f" s), delivered {self.delivered_at_end}"
        )


def java_settings(refusal: Refusal, kind: str = SPARK) -> list[str]:
    """The refusal's producer properties as the Java client (Spark's sink of `kind`) spells
    them: the SASL login as a JAAS entry, the delivery timeout for librdkafka's message
    timeout."""
    props = dict(p.replace("{kind}", kind).split("=", 1) for p in refusal.kafka)
    user, password = props.pop("sasl.username", None), props.pop("sasl.password", None)
    if user is not None:
        props["sasl.jaas.config"] = (
            "org.apache.kafka.common.security.plain.PlainLoginModule required "
            f'username="{user}" password="{password}";'
        )
    timeout = refusal.message_timeout_ms
    # delivery.timeout.ms must be at least request.timeout.ms + linger.ms (Java's rule)
    props["delivery.timeout.ms"] = str(timeout)
    props["request.timeout.ms"] = str(min(30_000, timeout // 2))
    return [f"{key}={value}" for key, value in props.items()]


@dataclass(frozen=True)
class SparkExecutor:
    """Where the sidecar reads Spark's view of the sink's one executor."""

    ui: str
    application_id: str
    executor_id: str
    pid: int

    def sidecar_argv(self) -> list[str]:
        return [
            *("--spark-ui-url", self.ui, "--application-id", self.application_id),
            *("--executor-id", self.executor_id),
            *("--spark-interval-seconds", str(Timing().spark_interval_seconds)),
            *("--socket-process", str(self.pid)),
        ]


def check_throttled_and_healthy(seen: Watched) -> None:
    """The quota control's claims (AssertionError with what was seen otherwise): the broker
    throttled the producer, it kept delivering after the first throttle, met no error, and
    the sidecar said only `healthy` (after its first round's `unknown`), pod and producer."""
    assert seen.throttles > 0, f"the broker never throttled: {seen.describe()}"
    assert seen.delivered_at_end > seen.delivered_at_first_throttle >= 0, seen.describe()
    assert not seen.errors, seen.describe()
    verdicts = [verdict for _, verdict, _ in seen.changes]
    if verdicts[:1] == ["unknown"]:  # the sidecar's first round, before any evidence
        verdicts = verdicts[1:]
    assert verdicts == ["healthy"], seen.describe()
    assert seen.producer_verdicts <= {"healthy"}, seen.describe()


class ProducerRun:
    """The producer process of one kind writing as a `Refusal` says, and what it said
    (plain and Spark: stdout lines; wrapper: telemetry and its structured log)."""

    def __init__(self, kind: str, refusal: Refusal, bootstrap: str, work: Path) -> None:
        self.kind, self.work = kind, work
        self.telemetry = work / "telemetry"
        self.telemetry.mkdir()
        self.out_path, self.err_path = work / "producer.out", work / "producer.err"
        settings = [f"-X{p.replace('{kind}', kind)}" for p in refusal.kafka]
        if kind == "wrapper":
            argv = [
                *(sys.executable, "-m", "hangwatch_demo.workload", "--bootstrap", bootstrap),
                *("--topic", refusal.topic, "--rate", str(refusal.rate)),
                *("--telemetry-dir", str(self.telemetry)),
                *("--checkpoint", str(work / "checkpoint")),
                *("--message-timeout-ms", str(refusal.message_timeout_ms)),
                *("--value-bytes", str(refusal.value_bytes), "--retry-refused", *settings),
            ]
        elif kind == "confluent-kafka":
            argv = [
                *(sys.executable, "-m", "hangwatch_testing.clients.plain_producer"),
                *("--bootstrap", bootstrap, "--topic", refusal.topic),
                *("--rate", str(refusal.rate), "--acks", "all"),
                *("--message-timeout-ms", str(refusal.message_timeout_ms)),
                *("--value-bytes", str(refusal.value_bytes), "--retry-refused", *settings),
            ]
        elif kind in SPARK_KINDS:
            argv = [
                *(sys.executable, "-m", "hangwatch_testing.clients.spark_producer"),
                *("--bootstrap", bootstrap, "--topic", refusal.topic, "--work", str(work)),
                *("--rows", str(refusal.rows), "--value-bytes", str(refusal.value_bytes or 16)),
                *(f"-X{p}" for p in java_settings(refusal, kind)),
            ]
            if kind == SPARK_TELEMETRY:
                argv += ["--telemetry-dir", str(self.telemetry)]
        else:
            raise ValueError(f"unknown producer {kind!r} (one of {', '.join(ALL_KINDS)})")
        with self.out_path.open("w") as out, self.err_path.open("w") as err:
            # Spark's JVMs (the driver's, the executor the worker launches) share the session
            self.proc = subprocess.Popen(
                argv, stdout=out, stderr=err, start_new_session=kind in SPARK_KINDS
            )

    def spark_executor(self, timeout_seconds: float = SPARK_READY_SECONDS) -> SparkExecutor:
        """The Spark producer's executor, once it has registered with the driver."""

        def ready() -> SparkExecutor | None:
            for line in self.out_path.read_text(errors="replace").splitlines():
                if line.startswith("ready "):
                    ui, app, executor, pid = line.split()[1:5]
                    return SparkExecutor(ui, app, executor, int(pid))
            return None

        found: SparkExecutor = wait_for(
            ready,
            timeout_seconds,
            "the Spark producer's executor",
            interval=0.5,
            give_up=lambda: self.proc.poll() is not None,
            context=lambda: self.err_path.read_text(errors="replace")[-2000:],
        )
        return found

    def report(self) -> tuple[list[str], int, int]:
        """(errors, throttles, delivered) the producer has reported so far."""
        if self.kind in ("confluent-kafka", *SPARK_KINDS):
            lines = self.out_path.read_text(errors="replace").splitlines()
            errors = [
                ln for ln in lines if ln.startswith(("error ", "client-error ", "job-failed "))
            ]
            throttles = sum(
                1 for ln in lines if ln.startswith("throttled ") and ln != "throttled 0"
            )
            oks = [int(ln.split()[1]) for ln in lines if ln.startswith("ok ")]
            return errors, throttles, oks[-1] if oks else 0
        errors, delivered = [], 0
        for doc in telemetry_docs(self.telemetry):
            delivered += int(doc["counters"].get("delivered", 0))
            error = doc.get("last_error") or {}
            if error:
                errors.append(f"{error.get('code', '')}: {error.get('reason', '')}")
            errors.extend(f"{code} x{n}" for code, n in (doc.get("error_counts") or {}).items())
        log = self.err_path.read_text(errors="replace").splitlines()
        throttles = sum(1 for ln in log if '"msg":"throttled"' in ln)
        return errors, throttles, delivered

    def stop(self) -> None:
        if self.kind not in SPARK_KINDS:
            stop_process(self.proc, 10)
            return
        stop_process(self.proc, SPARK_STOP_SECONDS)  # cancels the job, stops the JVMs
        with contextlib.suppress(ProcessLookupError):  # and anything of its session left
            os.killpg(self.proc.pid, signal.SIGKILL)


def watch_refusal(
    lab: Lab,
    refusal: Refusal,
    kind: str,
    *,
    timing: SidecarTiming | None = None,
    after_error_seconds: float = 20.0,
    quota_watch_seconds: float = 30.0,
    error_timeout_seconds: float | None = None,
) -> Watched:
    """One producer of `kind` through `refusal`, the sidecar watching (see the module doc).
    `error_timeout_seconds`: how long to wait for the producer's first error, or for the
    quota its first throttle (default 60 s;
    for Spark's sink 150 s: its Java client waits max.block.ms, 60 s, for a topic's
    metadata before its send fails)."""
    timing = timing or SidecarTiming()
    if error_timeout_seconds is None:
        error_timeout_seconds = 150.0 if kind in SPARK_KINDS else 60.0
    bootstrap = lab.sasl_bootstrap if refusal.sasl else lab.bootstrap  # type: ignore[attr-defined]
    with tempfile.TemporaryDirectory(prefix="hangwatch-refusal-") as tmp:
        producer = ProducerRun(kind, refusal, bootstrap, Path(tmp))
        sidecar = None
        try:
            if kind in SPARK_KINDS:
                watched = producer.spark_executor().sidecar_argv()
            else:
                watched = ["--socket-process", str(producer.proc.pid)]
            sidecar = SidecarProcess(
                lab.bootstrap, producer.telemetry, timing, *watched, topics=refusal.topic
            )
            return _watch(
                Watched(refusal.id, kind, lab.engine_description),
                refusal,
                producer,
                sidecar,
                after_error_seconds,
                quota_watch_seconds,
                error_timeout_seconds,
            )
        finally:
            if sidecar is not None:
                sidecar.stop()
            producer.stop()


def _watch(
    seen: Watched,
    refusal: Refusal,
    producer: ProducerRun,
    sidecar: SidecarProcess,
    after_error_seconds: float,
    quota_watch_seconds: float,
    error_timeout_seconds: float,
) -> Watched:
    started = time.monotonic()
    last = ""
    while True:
        elapsed = time.monotonic() - started
        doc = sidecar.status()
        seen.final = doc
        if doc["verdict"] != last:
            last = str(doc["verdict"])
            seen.changes.append((round(elapsed, 2), last, list(doc["reasons"])))
        for assessment in (doc.get("producers") or {}).values():
            seen.producer_verdicts.add(str(assessment.get("verdict")))
        errors, throttles, delivered = producer.report()
        if errors and seen.first_error_seconds is None:
            seen.first_error_seconds = round(elapsed, 2)
        if throttles and seen.delivered_at_first_throttle < 0:
            seen.delivered_at_first_throttle = delivered
            seen.first_throttle_seconds = round(elapsed, 2)
        seen.errors, seen.throttles, seen.delivered_at_end = errors, throttles, delivered
        if producer.proc.poll() is not None:
            raise RuntimeError(f"the {producer.kind} producer exited: {seen.describe()}")
        if refusal.error:
            if seen.first_error_seconds is not None:
                if elapsed - seen.first_error_seconds >= after_error_seconds:
                    break
            elif elapsed > error_timeout_seconds:
                break  # the test says the producer never met the refusal
        elif seen.first_throttle_seconds is not None:
            if elapsed - seen.first_throttle_seconds >= quota_watch_seconds:
                break
        elif elapsed > error_timeout_seconds:
            break  # the test says the broker never throttled
            break
        time.sleep(0.5)
    seen.seconds = round(time.monotonic() - started, 2)
    return seen
