"""The sidecar's settings: one typed object, its command-line flags and environment variables.

Every field becomes a flag (`--probe-interval-seconds`) and an environment variable
(`HANGWATCH_PROBE_INTERVAL_SECONDS`); a flag wins over the environment, which wins
over the default. Kafka client properties (security) come from `-X key=value` or
`HANGWATCH_KAFKA_<KEY>` variables (`HANGWATCH_KAFKA_SASL_PASSWORD` ->
`sasl.password`), which the injected pod fills from Secrets. Validation turns bad
values into one-line `UsageError`s.
"""

from __future__ import annotations

import argparse
import math
import os
import re
from collections.abc import Mapping
from dataclasses import MISSING, dataclass, field, fields
from pathlib import Path
from typing import Any

from hangwatch import rdkafka_conf, spark_driver
from hangwatch.defaults import STANDALONE
from hangwatch.errors import UsageError
from hangwatch.properties import add_properties_argument, parse_assignments
from hangwatch.wire import sidecar_http
from hangwatch_producer.wire import telemetry
from hangwatch_sidecar.probe.settings import MAX_TIMEOUT_MS
from hangwatch_sidecar.sockets.owners import ProcessRoot, parse_process_root

DEFAULT_PORT = sidecar_http.PORT
"""The sidecar's one HTTP port (metrics, status, health); the injection webhook uses it."""
MAX_SECONDS = 7 * 24 * 3600
"""Longest interval or threshold accepted: beyond a week a setting is a typo (and a sleep
of 1e308 s overflows)."""

KAFKA_ENV_PREFIX = "HANGWATCH_KAFKA_"
_SPARK_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$")
"""Application ids (`spark-<hex>`, `app-<date>-<n>`, `local-<n>`, `application_<n>_<n>`)
and executor ids (`1`, `driver`): what may go into a REST path."""

PROBE_MODES = ("passive-first", "fresh")
"""Values of `probe_mode` (see `hangwatch_sidecar.probing`)."""


def _doc(text: str) -> dict[str, str]:
    return {"doc": text}


@dataclass(frozen=True)
class SidecarSettings:
    """Configuration of one sidecar; see each field's `doc` for why its default is what it is."""

    bootstrap: str = field(
        default="",
        metadata=_doc(
            "Kafka bootstrap list host:port[,host:port...] (required): the same list the "
            "producer uses, so dead entries in it are found."
        ),
    )
    topics: str = field(
        default="",
        metadata=_doc(
            "Comma-separated topics the producers write; leaderless partitions of other topics are "
            "ignored. Empty: topics named in producer telemetry."
        ),
    )
    port: int = field(
        default=DEFAULT_PORT,
        metadata=_doc("HTTP port for /metrics, /status and /healthz (0: any free port, logged)."),
    )
    probe_interval_seconds: float = field(
        default=float(STANDALONE.probe_interval_seconds),
        metadata=_doc(
            "Broker reachability probe period (jittered by +-20%). 5 s finds a blackhole within "
            "2 intervals + connect timeout (~13 s) while costing each broker 0.2 connections/s."
        ),
    )
    metadata_interval_seconds: float = field(
        default=30.0,
        metadata=_doc(
            "Cluster metadata refresh period when all is well; refreshed at once when anything "
            "looks wrong. 30 s keeps 1,000 sidecars at ~33 metadata requests/s cluster-wide."
        ),
    )
    connect_timeout_ms: int = field(
        default=3000,
        metadata=_doc(
            "TCP connect (and TLS handshake) timeout per broker: a blackholed broker costs at "
            "most this; an answering broker on a healthy network connects in milliseconds."
        ),
    )
    request_timeout_ms: int = field(
        default=3000,
        metadata=_doc(
            "Kafka ApiVersions/metadata round-trip timeout: beyond it a broker that accepted TCP "
            "is `unresponsive`."
        ),
    )
    stall_seconds: float = field(
        default=float(STANDALONE.stall_seconds),
        metadata=_doc(
            "Pending messages with no delivery for this long, cluster healthy: producer_hung (S2)."
        ),
    )
    heartbeat_seconds: float = field(
        default=float(STANDALONE.heartbeat_seconds),
        metadata=_doc(
            "Telemetry unchanged this long while the producer lives with pending messages: "
            "producer_hung (S4). Telemetry refreshes every statistics interval (1 s)."
        ),
    )
    metadata_max_age_seconds: float = field(
        default=float(STANDALONE.metadata_max_age_seconds),
        metadata=_doc(
            "Producer metadata older than this: metadata_stale (S1). Matches the wrapper's "
            "metadata.max.age.ms; a healthy producer refreshes every 60 s."
        ),
    )
    election_grace_seconds: float = field(
        default=float(STANDALONE.election_grace_seconds),
        metadata=_doc(
            "Leaderless partitions are an expected election this long (S2: 1-2 s elections)."
        ),
    )
    producer_request_timeout_seconds: float = field(
        default=float(STANDALONE.producer_request_timeout_seconds),
        metadata=_doc(
            "The producers' own request timeout (request.timeout.ms): a request unanswered on "
            "a live connection is the broker's (broker_degraded) until it has waited this long, "
            "producer_hung only past it (a broker may hold a write for its in-sync replicas)."
        ),
    )
    expected_write_interval_seconds: float = field(
        default=0.0,
        metadata=_doc(
            "How often the pod's producers write at least (0: not said). Every connection of "
            "the pod to brokers silent longer than this, cluster healthy, is producer_silent "
            "(alert only) without Spark's view saying a task runs: for pods that are not "
            "Spark executors (a producer service) or whose driver cannot be read. Not judged "
            "while Spark's view says no task of this executor runs."
        ),
    )
    time_to_error_budget_seconds: float = field(
        default=float(STANDALONE.time_to_error_budget_seconds),
        metadata=_doc(
            "Producers whose configured worst-case time to error exceeds this are flagged in "
            "/status (the S0 lesson: 3 s of configured timeout became 2 minutes)."
        ),
    )
    hysteresis_intervals: int = field(
        default=2,
        metadata=_doc(
            "A verdict must hold for this many evaluations before it is reported: one lost probe "
            "never flips the pod."
        ),
    )
    telemetry_dir: str = field(
        default=telemetry.DEFAULT_DIR,
        metadata=_doc("Directory of the producers' telemetry files (shared emptyDir)."),
    )
    telemetry_max_bytes: int = field(
        default=262144,
        metadata=_doc(
            "Telemetry files larger than this are not parsed (unknown, with a reason); the "
            "wrapper writes at most 64 KiB."
        ),
    )
    max_producers: int = field(
        default=64,
        metadata=_doc("At most this many producer processes are tracked per pod (bounded memory)."),
    )
    exit_when_gone: str = field(
        default="",
        metadata=_doc(
            "Legacy injection (shared process namespace): exit 0 once a process whose command "
            "line contains this text was seen and is gone, so the executor pod can complete."
        ),
    )
    application_id: str = field(
        default="",
        metadata=_doc(
            "This executor's Spark application id (the webhook sets it from the pod's "
            "spark-app-selector label). Empty: the one application the driver serves."
        ),
    )
    executor_id: str = field(
        default="",
        metadata=_doc(
            "This executor's Spark executor id (the webhook sets it from the pod's "
            "spark-exec-id label): whose tasks and threads the Spark view reads."
        ),
    )
    spark_driver_url: str = field(
        default="",
        metadata=_doc(
            "The executor's SPARK_DRIVER_URL (spark://CoarseGrainedScheduler@host:port), "
            "copied by the webhook: the Spark view reads the driver's UI on that host. "
            "Empty (and no --spark-ui-url): no Spark view."
        ),
    )
    spark_ui_port: int = field(
        default=spark_driver.DEFAULT_UI_PORT,
        metadata=_doc(
            "The driver UI's port (spark.ui.port; Spark's default 4040, which the driver's "
            "Kubernetes Service exposes). The webhook copies a spark.ui.port the job set."
        ),
    )
    spark_ui_url: str = field(
        default="",
        metadata=_doc(
            "The driver UI's base URL (http://host:port), when it is not the driver URL's "
            "host at --spark-ui-port; 'off' turns the Spark view off."
        ),
    )
    spark_interval_seconds: float = field(
        default=15.0,
        metadata=_doc(
            "Period of the reads of the driver's REST API: one thread dump of this executor "
            "per period (two more requests only for tasks running past half the stall "
            "threshold); 1,000 executors cost the driver ~67 requests/s. Also the period "
            "of the local JVM's thread dumps (--jvm-thread-dumps)."
        ),
    )
    spark_timeout_ms: int = field(
        default=3000,
        metadata=_doc(
            "Whole-request deadline of one REST read (connect + answer): a blackholed or "
            "trickling driver costs a background read this much, never a round. Also the "
            "deadline of one local JVM thread dump (attach, dump, read)."
        ),
    )
    jvm_thread_dumps: bool = field(
        default=False,
        metadata=_doc(
            "When the driver's REST API is not configured or does not answer, take the "
            "thread dump of the pod's own HotSpot JVMs (those of --socket-process's tree) "
            "through the JVM's attach mechanism: a file and a SIGQUIT, no capability, only "
            "to a JVM shown to catch SIGQUIT with attach enabled. Needs the pod's "
            "shareProcessNamespace and the sidecar running as the JVM's uid and gid. Each "
            "dump stops the JVM at a safepoint for milliseconds, once per Spark interval."
        ),
    )
    socket_view: bool = field(
        default=True,
        metadata=_doc(
            "Read the pod's own TCP connections to brokers (kernel tcp_info through sock_diag "
            "netlink; no capability needed): judges producers without hangwatch's telemetry."
        ),
    )
    client_releases: bool = field(
        default=True,
        metadata=_doc(
            "Name the published hangs of the Kafka client releases the pod runs (the "
            "producers' telemetry; the processes holding its connections to brokers: a Go "
            "binary's build information, a Java classpath, kafkajs's package.json, the "
            "confluent-kafka wheel; read once per process, as its own user): /status "
            "advisories, never an action."
        ),
    )
    python_stacks: bool = field(
        default=True,
        metadata=_doc(
            "When the pod's connections fall silent while Spark runs a task, sample the "
            "executor's Python threads with py-spy (needs the pod's shareProcessNamespace and "
            "CAP_SYS_PTRACE): a thread blocked inside the client is a hang, a task computing "
            "elsewhere is not. Off: silence alone stays producer_silent (alert only)."
        ),
    )
    not_judged: str = field(
        default="",
        metadata=_doc(
            "Features the pod's Pod Security level left out of this sidecar (comma-separated, "
            "e.g. process_view; set by the operator's webhook): /status names them and the "
            "evidence the pod cannot have."
        ),
    )
    python_stacks_timeout_ms: int = field(
        default=3000,
        metadata=_doc("Longest one py-spy read of one process may take."),
    )
    socket_ports: str = field(
        default="",
        metadata=_doc(
            "Comma-separated broker ports the socket view watches (empty: every broker's port). "
            "Narrows it to one listener when several share the brokers' addresses."
        ),
    )
    socket_uids: str = field(
        default="",
        metadata=_doc(
            "Comma-separated user ids whose sockets the socket view watches (empty: every owner; "
            "the sidecar's own sockets are always left out). Leaves out a container of the pod "
            "running as another user (a consumer, an acks=0 producer)."
        ),
    )
    socket_process: str = field(
        default="",
        metadata=_doc(
            "Keep only the sockets one process tree holds: a PID, or text of the root's "
            "command line (every process containing it, and all their descendants; e.g. "
            "ExecutorBackend). Empty: every process of the network namespace. For "
            "executors sharing one namespace; needs the processes visible (a pod's "
            "shareProcessNamespace) and readable (the same user)."
        ),
    )
    probe_mode: str = field(
        default="passive-first",
        metadata=_doc(
            "passive-first: no probe for a broker that just answered the pod's own connection, "
            "one kept probe connection per broker otherwise, a new connection only every "
            "fresh-connect interval or on doubt. fresh: a new connection to every broker every "
            "round (0.2 connections/s per broker per sidecar at a 5 s interval)."
        ),
    )
    fresh_connect_interval_seconds: float = field(
        default=300.0,
        metadata=_doc(
            "Passive-first: a new connection to each broker at least this often (new "
            "connections must keep working, not only the kept one): 1,000 sidecars cost a "
            "broker ~3 connections/s instead of 200/s at a 5 s interval."
        ),
    )
    passive_window_seconds: float = field(
        default=2.0,
        metadata=_doc(
            "Passive-first: the pod's own connection answered within this long (and at most a "
            "probe interval) stands for a probe of that broker."
        ),
    )
    kafka: Mapping[str, str] = field(
        default_factory=dict,
        metadata=_doc(
            "librdkafka properties for probing (security.protocol, sasl.*, ssl.*): -X key=value "
            "or HANGWATCH_KAFKA_<KEY> variables."
        ),
    )

    def validate(self) -> SidecarSettings:
        """Self, or a UsageError naming the first invalid setting."""
        if not self.bootstrap.strip():
            raise UsageError("--bootstrap (HANGWATCH_BOOTSTRAP) is required")
        if not 0 <= self.port < 65536:
            raise UsageError(f"--port must be 0..65535 (0: any free port), got {self.port}")
        for name in (
            "probe_interval_seconds",
            "metadata_interval_seconds",
            "stall_seconds",
            "heartbeat_seconds",
            "metadata_max_age_seconds",
            "election_grace_seconds",
            "producer_request_timeout_seconds",
            "time_to_error_budget_seconds",
            "spark_interval_seconds",
            "fresh_connect_interval_seconds",
            "passive_window_seconds",
        ):
            value = getattr(self, name)
            if not (math.isfinite(value) and 0 < value <= MAX_SECONDS):
                flag = _flag(name)
                raise UsageError(f"{flag} must be > 0 and <= {MAX_SECONDS} (a week), got {value}")
        for name, most in (
            ("connect_timeout_ms", MAX_TIMEOUT_MS),
            ("request_timeout_ms", MAX_TIMEOUT_MS),
            ("hysteresis_intervals", 100),
            ("telemetry_max_bytes", 64 << 20),
            ("max_producers", 10_000),
            ("spark_timeout_ms", MAX_TIMEOUT_MS),
            ("python_stacks_timeout_ms", MAX_TIMEOUT_MS),
        ):
            value = getattr(self, name)
            if not 1 <= value <= most:
                raise UsageError(f"{_flag(name)} must be 1..{most}, got {value}")
        if self.stall_seconds <= self.probe_interval_seconds:
            raise UsageError("--stall-seconds must be longer than --probe-interval-seconds")
        interval = self.expected_write_interval_seconds
        if interval != 0 and not (
            math.isfinite(interval) and self.probe_interval_seconds < interval <= MAX_SECONDS
        ):
            raise UsageError(
                "--expected-write-interval-seconds must be 0 (not said) or longer than "
                f"--probe-interval-seconds and <= {MAX_SECONDS}, got {interval}"
            )
        self._validate_spark()
        if self.probe_mode not in PROBE_MODES:
            raise UsageError(f"--probe-mode must be one of {', '.join(PROBE_MODES)}")
        _ = self.socket_port_set, self.socket_uid_set, self.socket_process_root
        return self

    def _validate_spark(self) -> None:
        for name in ("application_id", "executor_id"):
            value = getattr(self, name)
            if value and not _SPARK_ID.match(value):
                flag = _flag(name)
                raise UsageError(
                    f"{flag} must be letters, digits, '.', '_' or '-' (at most 200), got {value!r}"
                )
        if not 0 < self.spark_ui_port < 65536:
            raise UsageError(f"--spark-ui-port must be 1..65535, got {self.spark_ui_port}")
        try:
            spark_driver.resolve_ui(self.spark_ui_url, self.spark_driver_url, self.spark_ui_port)
        except spark_driver.AddressError as exc:
            flag = "--spark-ui-url" if self.spark_ui_url.strip() else "--spark-driver-url"
            raise UsageError(f"{flag}: {exc}") from None

    @property
    def spark_ui(self) -> spark_driver.DriverUi | None:
        """The driver UI the Spark view reads; None when it is off or not configured."""
        return spark_driver.resolve_ui(self.spark_ui_url, self.spark_driver_url, self.spark_ui_port)

    @property
    def socket_port_set(self) -> frozenset[int]:
        return _numbers("--socket-ports", self.socket_ports, 1, 65535)

    @property
    def socket_uid_set(self) -> frozenset[int]:
        return _numbers("--socket-uids", self.socket_uids, 0, 2**32 - 2)

    @property
    def socket_process_root(self) -> ProcessRoot | None:
        """The process tree the socket view keeps (None: every process)."""
        try:
            return parse_process_root(self.socket_process)
        except ValueError as exc:
            raise UsageError(f"--socket-process: {exc}") from None

    @property
    def topic_set(self) -> frozenset[str]:
        return frozenset(t.strip() for t in self.topics.split(",") if t.strip())

    @property
    def telemetry_path(self) -> Path:
        return Path(self.telemetry_dir)


def _numbers(flag: str, text: str, low: int, high: int) -> frozenset[int]:
    """A comma-separated list of integers in [low, high]; UsageError naming the flag."""
    found = set()
    for part in text.split(","):
        if not part.strip():
            continue
        value = part.strip()
        if not value.isdigit() or not low <= int(value) <= high:
            raise UsageError(f"{flag}: {value!r} is not a number in {low}..{high}")
        found.add(int(value))
    return frozenset(found)


def parse_bool(text: str) -> bool:
    """true/false, yes/no, on/off, 1/0 (any case); ValueError otherwise."""
    value = text.strip().lower()
    if value in ("true", "yes", "on", "1"):
        return True
    if value in ("false", "no", "off", "0"):
        return False
    raise ValueError(f"not a boolean: {text!r}")


def _env_name(name: str) -> str:
    return "HANGWATCH_" + name.upper()


def _flag(name: str) -> str:
    """The command-line flag of setting `name` (`--stall-seconds`)."""
    return "--" + name.replace("_", "-")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """One flag per setting; defaults are resolved later so the environment can apply."""
    for f in fields(SidecarSettings):
        if f.name == "kafka":
            continue
        default = f.default if f.default is not MISSING else None
        kind: Any = type(default) if default is not None else str
        parser.add_argument(
            _flag(f.name),
            dest=f.name,
            type=parse_bool if kind is bool else kind,
            default=None,
            # argparse formats help with %: a literal one in a doc would crash --help.
            help=f"{f.metadata['doc']} [env {_env_name(f.name)}; default {default!r}]".replace(
                "%", "%%"
            ),
        )
    add_properties_argument(
        parser, "kafka", "librdkafka property for probes (repeatable); or HANGWATCH_KAFKA_<KEY>"
    )


def _convert(name: str, raw: str, kind: type) -> Any:
    try:
        return parse_bool(raw) if kind is bool else kind(raw)
    except ValueError:
        raise UsageError(f"{_env_name(name)}={raw!r} is not a valid {kind.__name__}") from None


def kafka_properties(pairs: list[str], environ: Mapping[str, str]) -> dict[str, str]:
    """Properties from HANGWATCH_KAFKA_* variables, overridden by -X pairs."""
    props = {
        key[len(KAFKA_ENV_PREFIX) :].lower().replace("_", "."): value
        for key, value in environ.items()
        if key.startswith(KAFKA_ENV_PREFIX) and len(key) > len(KAFKA_ENV_PREFIX)
    }
    props.update(parse_assignments(pairs))
    return props


def from_args(
    args: argparse.Namespace, environ: Mapping[str, str] | None = None
) -> SidecarSettings:
    """Settings from parsed flags, then `HANGWATCH_*` environment, then defaults."""
    env = os.environ if environ is None else environ
    values: dict[str, Any] = {}
    for f in fields(SidecarSettings):
        if f.name == "kafka":
            continue
        flag_value = getattr(args, f.name, None)
        if flag_value is not None:
            values[f.name] = flag_value
        elif _env_name(f.name) in env:
            values[f.name] = _convert(f.name, env[_env_name(f.name)], type(f.default))
    values["kafka"] = kafka_properties(list(getattr(args, "kafka", []) or []), env)
    rdkafka_conf.validate(values["kafka"])  # as `hangwatch probe` does with its -X
    return SidecarSettings(**values).validate()
