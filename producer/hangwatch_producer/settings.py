"""Typed settings of the producer wrapper and the librdkafka configuration built from them.

A PySpark job hands `hangwatch_producer.producer()` its own librdkafka configuration
(a dict, as for `confluent_kafka.Producer`) and optionally a `ProducerSettings`. The
settings carry hangwatch's safe defaults: every timeout bounded, so a hung cluster or
a hung client turns into a failed Spark task (which Spark retries) within minutes,
never a task that waits forever. `build_config` merges them: a property the job sets
explicitly always wins over the default, and the merged result is validated here so
that a bad configuration fails at once with a one-line `UsageError`.

Defaults and their reasons follow librdkafka's CONFIGURATION.md (librdkafka 2.x).
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from typing import Any

from hangwatch_producer.errors import UsageError
from hangwatch_producer.wire.telemetry import ACKS_KEYS, DIR_ENV

TELEMETRY_DIR_ENV = DIR_ENV
"""Environment variable naming the directory the telemetry files are written to."""

MIN_TELEMETRY_BYTES = 16_384
"""Smallest allowed telemetry size bound: the minimal document must always fit."""

CALLBACK_KEYS = frozenset({"on_delivery", "error_cb", "throttle_cb"})
"""Callbacks the wrapper accepts in the configuration and runs on its callback thread."""

PASSTHROUGH_KEYS = frozenset({"logger", "oauth_cb"})
"""Callables handed to confluent-kafka unchanged: they run on the poll thread (see docs)."""

REJECTED_KEYS = {
    "stats_cb": "the statistics callback is owned by hangwatch (read the telemetry file instead)",
    "delivery.report.only.error": "the wrapper counts successful deliveries to prove at-least-once",
}
"""Configuration keys the wrapper cannot honour, with the reason shown to the user."""

ALIASES = {
    "bootstrap.servers": ("bootstrap.servers", "metadata.broker.list"),
    "message.timeout.ms": ("message.timeout.ms", "delivery.timeout.ms"),
    "acks": ACKS_KEYS,
    "enable.idempotence": ("enable.idempotence",),
}
"""librdkafka property -> every name librdkafka accepts for it."""

_SETTINGS_PROPERTIES = {
    "message_timeout_ms": "message.timeout.ms",
    "request_timeout_ms": "request.timeout.ms",
    "socket_timeout_ms": "socket.timeout.ms",
    "socket_connection_setup_timeout_ms": "socket.connection.setup.timeout.ms",
    "topic_metadata_refresh_interval_ms": "topic.metadata.refresh.interval.ms",
    "metadata_max_age_ms": "metadata.max.age.ms",
    "enable_idempotence": "enable.idempotence",
    "acks": "acks",
}
"""Settings field -> the librdkafka property it provides a default for."""


_TEXT_FIELDS = frozenset({"acks", "telemetry_dir"})
_FLAG_FIELDS = frozenset({"enable_idempotence", "telemetry_enabled"})


@dataclass(frozen=True)
class ProducerSettings:
    """hangwatch's defaults for a Kafka producer inside a Spark task; every field overridable.

    Properties the job sets in its own configuration dict win over these defaults.
    """

    message_timeout_ms: int = 60_000
    """`message.timeout.ms`: the longest a message may wait for acknowledgement, retries
    included. librdkafka's default is 300000 (5 min) of silence per message; one minute
    still rides out a leader election (seconds) or one broker's restart, and turns a hung
    cluster into a failed, retried task five times sooner. Must not be 0 (infinite)."""

    request_timeout_ms: int = 15_000
    """`request.timeout.ms`: how long the broker may wait for the in-sync replicas before
    answering a produce request (enforced by the broker, needs acks != 0). Default 30000;
    15 s lets at least three attempts fit into `message_timeout_ms`."""

    socket_timeout_ms: int = 20_000
    """`socket.timeout.ms`: client-side timeout of one request (a produce request uses the
    lesser of this and the message's remaining time). Default 60000; a broker that accepts
    TCP but never answers (unresponsive) would otherwise hold a request a whole minute.
    Kept above `request_timeout_ms` so the broker's own timeout answer arrives first."""

    socket_connection_setup_timeout_ms: int = 10_000
    """`socket.connection.setup.timeout.ms`: TCP connect plus TLS/SASL handshake. Default
    30000; a blackholed broker (dead host, S0/S3) costs the full timeout on every connect
    attempt while a closed port refuses in milliseconds. 10 s is ample for a handshake
    inside a data centre and cuts each wasted attempt by two thirds."""

    topic_metadata_refresh_interval_ms: int = 60_000
    """`topic.metadata.refresh.interval.ms`: periodic metadata refresh. Default 300000;
    refreshing every minute learns moved leaders and a changed broker set (S1, S3) sooner
    at the cost of one small Metadata request a minute."""

    metadata_max_age_ms: int = 180_000
    """`metadata.max.age.ms`: cached metadata older than this is not trusted. librdkafka
    defaults it to three refresh intervals (900000); we keep that ratio to the shorter
    refresh interval above."""

    enable_idempotence: bool = True
    """`enable.idempotence`: retries neither duplicate nor reorder messages within one
    producer session, and librdkafka then enforces acks=all and at most 5 requests in
    flight. Default false."""

    acks: str = "all"
    """`acks`: a message counts as delivered only when every in-sync replica has it, so a
    leader crash right after the acknowledgement cannot lose it. `0` is refused: without
    an acknowledgement at-least-once cannot be proven."""

    statistics_interval_ms: int = 1_000
    """`statistics.interval.ms` while telemetry is on: each statistics event refreshes the
    telemetry file, so this is the heartbeat period the sidecar watches. librdkafka's
    granularity is 1000 ms; larger values make hang detection proportionally slower."""

    flush_timeout_seconds: float | None = None
    """How long closing the producer waits for outstanding acknowledgements before it
    raises `DeliveryFailed`. None means the effective message timeout plus 5 s, so every
    message gets its own delivery report (success or timeout) before close gives up."""

    queue_full_timeout_seconds: float = 30.0
    """How long `send()` keeps retrying while librdkafka's local queue is full
    (`BufferError`) before it raises `DeliveryFailed`. A queue that stays full this long
    means the producer makes no progress (S4: the Java client's `max.block.ms`)."""

    callback_drain_timeout_seconds: float = 10.0
    """After the final flush, how long close waits for the job's own `on_delivery`
    callbacks (run on the wrapper's callback thread) to finish before raising
    `CallbackError`."""

    telemetry_enabled: bool = True
    """False turns telemetry off even when the directory is set (benchmarks, jobs that run
    without a sidecar)."""

    telemetry_dir: str | None = None
    """Directory of the telemetry files; None reads `HANGWATCH_TELEMETRY_DIR` (set by the
    hangwatch webhook to the volume the sidecar shares). Unset means no telemetry."""

    telemetry_max_bytes: int = 65_536
    """Upper bound of one telemetry file. Detail is dropped (partitions first, config
    last) until the document fits, so a job writing to thousands of partitions cannot
    fill the shared volume or slow the sidecar down."""

    poll_interval_seconds: float = 0.1
    """Longest single wait of the background poll thread. Events are served as soon as
    they arrive; this only bounds how quickly the thread notices it should stop."""

    max_recorded_errors: int = 10
    """How many delivery errors (the first ones) `DeliveryFailed` reports in detail."""

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name in _TEXT_FIELDS:
                ok = value is None or isinstance(value, str)
                expected = "a string"
            elif f.name in _FLAG_FIELDS:
                ok, expected = isinstance(value, bool), "true or false"
            else:
                ok = (value is None and f.name == "flush_timeout_seconds") or (
                    isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0
                )
                expected = "a number >= 0"
            if not ok:
                raise UsageError(f"ProducerSettings.{f.name} must be {expected}, got {value!r}")
        if self.message_timeout_ms == 0:
            raise UsageError("ProducerSettings.message_timeout_ms must be > 0 (0 means no limit)")
        if str(self.acks).strip() == "0":
            raise UsageError("ProducerSettings.acks=0 gives no acknowledgement; use 'all'")
        if self.telemetry_max_bytes < MIN_TELEMETRY_BYTES:
            raise UsageError(
                f"ProducerSettings.telemetry_max_bytes must be >= {MIN_TELEMETRY_BYTES}, "
                f"got {self.telemetry_max_bytes}"
            )
        if self.poll_interval_seconds <= 0:
            raise UsageError("ProducerSettings.poll_interval_seconds must be > 0")
        if self.max_recorded_errors < 1:
            raise UsageError("ProducerSettings.max_recorded_errors must be >= 1")

    def resolved_telemetry_dir(self, environ: Mapping[str, str] | None = None) -> str | None:
        """The telemetry directory in effect (field, else environment), None when off."""
        if not self.telemetry_enabled:
            return None
        env = os.environ if environ is None else environ
        return self.telemetry_dir or env.get(TELEMETRY_DIR_ENV) or None


@dataclass(frozen=True)
class EffectiveConfig:
    """The merged configuration: what librdkafka gets and the job's own callbacks."""

    properties: dict[str, Any]
    """librdkafka properties (no callables) exactly as passed to the client."""
    callbacks: dict[str, Callable[..., Any]]
    """The job's `on_delivery` / `error_cb` / `throttle_cb`, run on the callback thread."""
    passthrough: dict[str, Any]
    """`logger` / `oauth_cb`, handed to confluent-kafka unchanged."""

    def get(self, name: str) -> Any:
        """The value of a property under any of its alias names, or None."""
        for alias in ALIASES.get(name, (name,)):
            if alias in self.properties:
                return self.properties[alias]
        return None

    @property
    def bootstrap(self) -> list[str]:
        """The bootstrap addresses, in the order configured."""
        return [a.strip() for a in str(self.get("bootstrap.servers") or "").split(",") if a.strip()]

    @property
    def message_timeout_seconds(self) -> float:
        """The effective `message.timeout.ms`, in seconds."""
        return int(self.get("message.timeout.ms") or 300_000) / 1000

    @property
    def statistics_interval_seconds(self) -> float:
        """The effective `statistics.interval.ms`, in seconds (0 when off)."""
        return int(self.get("statistics.interval.ms") or 0) / 1000


def default_client_id(pid: int, number: int) -> str:
    """`hangwatch-<host>-<pid>-<n>`: in Kubernetes the host name is the pod name."""
    return f"hangwatch-{socket.gethostname()}-{pid}-{number}"


def build_config(
    conf: Mapping[str, Any],
    settings: ProducerSettings,
    *,
    telemetry_on: bool,
    client_id: str,
) -> EffectiveConfig:
    """Merge the job's configuration over the settings' defaults and validate the result."""
    if not isinstance(conf, Mapping):
        raise UsageError(f"producer configuration must be a dict, got {type(conf).__name__}")
    for key, reason in REJECTED_KEYS.items():
        if key in conf and (key != "delivery.report.only.error" or _truthy(conf[key])):
            raise UsageError(f"producer configuration {key!r} is not supported: {reason}")
    callbacks: dict[str, Callable[..., Any]] = {}
    passthrough: dict[str, Any] = {}
    properties: dict[str, Any] = {}
    for key, value in conf.items():
        if not isinstance(key, str):
            raise UsageError(f"producer configuration keys must be strings, got {key!r}")
        if key in CALLBACK_KEYS:
            if not callable(value):
                raise UsageError(f"producer configuration {key!r} must be callable")
            callbacks[key] = value
        elif key in PASSTHROUGH_KEYS:
            passthrough[key] = value
        else:
            properties[key] = value
    _check_aliases(properties)
    merged = _defaults(settings, telemetry_on, client_id)
    for prop, value in merged.items():
        if not any(alias in properties for alias in ALIASES.get(prop, (prop,))):
            properties[prop] = value
    effective = EffectiveConfig(properties, callbacks, passthrough)
    _validate(effective, telemetry_on)
    return effective


def _defaults(settings: ProducerSettings, telemetry_on: bool, client_id: str) -> dict[str, Any]:
    defaults: dict[str, Any] = {"client.id": client_id}
    for field_name, prop in _SETTINGS_PROPERTIES.items():
        defaults[prop] = getattr(settings, field_name)
    if telemetry_on:
        defaults["statistics.interval.ms"] = settings.statistics_interval_ms
    return defaults


def _check_aliases(properties: Mapping[str, Any]) -> None:
    for names in ALIASES.values():
        present = [n for n in names if n in properties]
        if len(present) > 1:
            raise UsageError(f"producer configuration sets both {present[0]!r} and {present[1]!r}")


def _validate(config: EffectiveConfig, telemetry_on: bool) -> None:
    if not config.bootstrap:
        raise UsageError("producer configuration needs 'bootstrap.servers' (host:port,...)")
    if str(config.get("acks")).strip() == "0":
        raise UsageError("producer configuration acks=0 gives no acknowledgement; use acks=all")
    try:
        timeout_ms = int(config.get("message.timeout.ms"))
    except (TypeError, ValueError):
        raise UsageError(
            f"producer configuration message.timeout.ms must be an integer, "
            f"got {config.get('message.timeout.ms')!r}"
        ) from None
    if timeout_ms <= 0:
        raise UsageError(
            "producer configuration message.timeout.ms must be > 0 (0 waits forever, "
            "which is the silent hang hangwatch exists to prevent)"
        )
    if telemetry_on and config.statistics_interval_seconds <= 0:
        raise UsageError(
            "statistics.interval.ms=0 stops the telemetry heartbeat; set "
            "ProducerSettings(telemetry_enabled=False) to turn telemetry off instead"
        )


def _truthy(value: Any) -> bool:
    return str(value).strip().lower() in {"true", "1", "yes", "on"}
