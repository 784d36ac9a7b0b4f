"""Worst-case time-to-error of a Java `KafkaProducer` (kafka-clients >= 2.1), brokers blackholed.

`send()` blocks up to `max.block.ms` (default 60000) while metadata for the topic is
missing or the buffer (`buffer.memory`) is full, then throws; once appended, a record
fails `delivery.timeout.ms` (default 120000, KIP-91) later, retries included. The worst
case adds both: metadata arrives just before the brokers vanish. `request.timeout.ms`
(30000), `retries` (INT32_MAX) and `retry.backoff.ms` (100) can only end a record
earlier. The client refuses an explicit `delivery.timeout.ms` below
`linger.ms + request.timeout.ms` and raises a default one to that sum
(`KafkaProducer.configureDeliveryTimeout`). Defaults are the 3.x line's (used by
Spark's Kafka connector; `linger.ms` became 5 in 4.0). Keys may carry Spark's `kafka.`
option prefix.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from hangwatch.time_to_error.client_config import boolean, canonical_keys, integer
from hangwatch.time_to_error.estimate import (
    INT32_MAX,
    ClientSettingsError,
    Code,
    ConfigFinding,
    Term,
    dead_broker_refresh,
    retries_over_budget,
    seconds_text,
    unlimited_idempotent_retries,
)
from hangwatch_producer.wire.telemetry import ACKS_ALL, acks_value

CLIENT = "java"

DEFAULTS = {
    "max.block.ms": 60000,
    "delivery.timeout.ms": 120000,
    "request.timeout.ms": 30000,
    "linger.ms": 0,
    "retries": INT32_MAX,
    "retry.backoff.ms": 100,
    "metadata.max.age.ms": 300000,
    "socket.connection.setup.timeout.ms": 10000,
    "socket.connection.setup.timeout.max.ms": 30000,
    "max.in.flight.requests.per.connection": 5,
}
"""kafka-clients 3.x defaults of the settings the model reads (ProducerConfig)."""

KNOWN_KEYS = frozenset(
    {
        *DEFAULTS,
        "acks",
        "auto.include.jmx.reporter",
        "batch.size",
        "bootstrap.servers",
        "buffer.memory",
        "client.dns.lookup",
        "client.id",
        "compression.gzip.level",
        "compression.lz4.level",
        "compression.type",
        "compression.zstd.level",
        "connections.max.idle.ms",
        "enable.idempotence",
        "enable.metrics.push",
        "interceptor.classes",
        "key.serializer",
        "max.request.size",
        "metadata.max.idle.ms",
        "metadata.recovery.rebootstrap.trigger.ms",
        "metadata.recovery.strategy",
        "metric.reporters",
        "metrics.num.samples",
        "metrics.recording.level",
        "metrics.sample.window.ms",
        "partitioner.adaptive.partitioning.enable",
        "partitioner.availability.timeout.ms",
        "partitioner.class",
        "partitioner.ignore.keys",
        "receive.buffer.bytes",
        "reconnect.backoff.max.ms",
        "reconnect.backoff.ms",
        "retry.backoff.max.ms",
        "security.protocol",
        "security.providers",
        "send.buffer.bytes",
        "transaction.timeout.ms",
        "transaction.two.phase.commit.enable",
        "transactional.id",
        "value.serializer",
    }
)
"""Producer configuration names of kafka-clients (ProducerConfig, 3.x to 4.1)."""

IGNORED_PREFIXES = ("sasl.", "ssl.")
"""Security settings: many, version-dependent, and none changes the time-to-error."""

BOOTSTRAP_KEY = "bootstrap.servers"
SPARK_PREFIX = "kafka."
IDEMPOTENT_MAX_IN_FLIGHT = 5
"""Idempotence left at its default is turned off above this many in-flight requests."""


@dataclass(frozen=True)
class JavaSettings:
    """The kafka-clients settings that decide how long a send to a blackholed cluster waits."""

    max_block_seconds: float
    """max.block.ms (60 s): send() waits this long for metadata or buffer space, then throws."""
    delivery_timeout_seconds: float
    """delivery.timeout.ms (120 s), as the client applies it: a record's one deadline."""
    delivery_timeout_raised: bool
    """True when the default was raised to linger.ms + request.timeout.ms."""
    request_timeout_seconds: float
    """request.timeout.ms (30 s): one request's wait before a retry."""
    retries: int
    """retries (INT32_MAX): only delivery.timeout.ms stops them."""
    retry_backoff_seconds: float
    """retry.backoff.ms (100 ms): sleep between retries."""
    metadata_max_age_seconds: float
    """metadata.max.age.ms (300 s): forced metadata refresh interval."""
    connection_setup_timeout_seconds: float
    """socket.connection.setup.timeout.ms (10 s): first connect timeout, doubling per failure."""
    connection_setup_timeout_max_seconds: float
    """socket.connection.setup.timeout.max.ms (30 s): cap of that doubling."""
    idempotent: bool
    """enable.idempotence (true since 3.0 unless retries/acks/in-flight conflict)."""


def canonical(config: Mapping[str, str]) -> dict[str, str]:
    """`config` without Spark's `kafka.` prefix; unknown keys are an error."""
    stripped = {k.removeprefix(SPARK_PREFIX): v for k, v in config.items()}
    return canonical_keys(stripped, KNOWN_KEYS, {}, CLIENT, IGNORED_PREFIXES)


def _cap_seconds(millis: int) -> float:
    return math.inf if millis >= INT32_MAX else millis / 1000


def _delivery_timeout(c: Mapping[str, str], linger_ms: int, request_ms: int) -> tuple[int, bool]:
    delivery_ms = integer(c, "delivery.timeout.ms", DEFAULTS["delivery.timeout.ms"])
    floor_ms = linger_ms + request_ms
    if delivery_ms >= INT32_MAX or delivery_ms >= floor_ms:
        return delivery_ms, False
    if "delivery.timeout.ms" in c:
        raise ClientSettingsError(
            f"delivery.timeout.ms ({delivery_ms} ms) must be >= linger.ms + request.timeout.ms "
            f"({floor_ms} ms): the Java producer refuses this configuration"
        )
    return floor_ms, True


def _idempotent(c: Mapping[str, str], retries: int) -> bool:
    if "enable.idempotence" in c:
        return boolean(c, "enable.idempotence", default=True)
    acks = c.get("acks", "all").strip().lower()
    in_flight_key = "max.in.flight.requests.per.connection"
    in_flight = integer(c, in_flight_key, DEFAULTS[in_flight_key], minimum=1)
    return retries > 0 and acks in ("all", "-1") and in_flight <= IDEMPOTENT_MAX_IN_FLIGHT


def acks(config: Mapping[str, str]) -> int:
    """The producer's acks (-1: all): all when it is idempotent (the default since 3.0
    unless its settings conflict), else its `acks` (the default, all, when unset)."""
    if parse_settings(config).idempotent:
        return ACKS_ALL
    found = acks_value(canonical(config).get("acks", "all"))
    return ACKS_ALL if found is None else found


def parse_settings(config: Mapping[str, str]) -> JavaSettings:
    """Typed settings from Java producer properties (defaults filled in)."""
    c = canonical(config)

    def ms(key: str) -> int:
        return integer(c, key, DEFAULTS[key])

    delivery_ms, raised = _delivery_timeout(c, ms("linger.ms"), ms("request.timeout.ms"))
    retries = ms("retries")
    return JavaSettings(
        max_block_seconds=_cap_seconds(ms("max.block.ms")),
        delivery_timeout_seconds=_cap_seconds(delivery_ms),
        delivery_timeout_raised=raised,
        request_timeout_seconds=ms("request.timeout.ms") / 1000,
        retries=retries,
        retry_backoff_seconds=ms("retry.backoff.ms") / 1000,
        metadata_max_age_seconds=ms("metadata.max.age.ms") / 1000,
        connection_setup_timeout_seconds=ms("socket.connection.setup.timeout.ms") / 1000,
        connection_setup_timeout_max_seconds=ms("socket.connection.setup.timeout.max.ms") / 1000,
        idempotent=_idempotent(c, retries),
    )


def _ms_text(seconds: float) -> str:
    return "unlimited" if math.isinf(seconds) else f"{round(seconds * 1000)} ms"


def terms(s: JavaSettings, brokers: int) -> tuple[Term, ...]:
    """send() blocking for metadata, then the record's delivery deadline."""
    block = Term(
        "send() blocks for metadata or buffer",
        s.max_block_seconds,
        "max.block.ms",
        _ms_text(s.max_block_seconds),
        ("max.block.ms",),
    )
    delivery = Term(
        "record expires",
        s.delivery_timeout_seconds,
        "delivery.timeout.ms",
        _ms_text(s.delivery_timeout_seconds)
        + (" (raised to linger.ms + request.timeout.ms)" if s.delivery_timeout_raised else ""),
        ("delivery.timeout.ms", "linger.ms", "request.timeout.ms"),
    )
    return (block, delivery)


def assumptions(s: JavaSettings, brokers: int) -> tuple[str, ...]:
    """What the Java model takes for granted, printed with every estimate."""
    return (
        "Java KafkaProducer, kafka-clients >= 2.1 (delivery.timeout.ms); defaults of the 3.x "
        "line; every broker blackholed",
        "send() blocks up to max.block.ms for missing metadata or a full buffer; the record then "
        "expires delivery.timeout.ms after it was appended; the worst case adds both",
        f"request.timeout.ms ({seconds_text(s.request_timeout_seconds)}) and retries "
        f"({s.retries}) can only end a record earlier",
        "not measured here (no kafka-clients jar on this machine): taken from the client's "
        "documentation and KafkaProducer.configureDeliveryTimeout",
    )


def _unbounded(s: JavaSettings) -> tuple[ConfigFinding, ...]:
    found = []
    for key, seconds in (
        ("max.block.ms", s.max_block_seconds),
        ("delivery.timeout.ms", s.delivery_timeout_seconds),
    ):
        if math.isinf(seconds):
            message = (
                f"{key} >= {INT32_MAX} ms (24.8 days) is effectively unbounded: "
                "a send to a blackholed cluster never reports"
            )
            found.append(ConfigFinding(Code.UNBOUNDED_WAIT, message))
    return tuple(found)


def findings(
    s: JavaSettings, parts: tuple[Term, ...], brokers: int, budget_seconds: float | None
) -> tuple[ConfigFinding, ...]:
    """Risky settings of this configuration (worst case: the sum of `parts`), worst first."""
    total = sum(t.seconds for t in parts)
    chain = (s.retries + 1) * s.request_timeout_seconds + s.retries * s.retry_backoff_seconds
    return (
        *_unbounded(s),
        *unlimited_idempotent_retries(
            s.idempotent,
            s.retries,
            "delivery.timeout.ms",
            s.delivery_timeout_seconds,
            budget_seconds,
        ),
        *retries_over_budget(
            chain,
            f"(retries {s.retries} + 1) x request.timeout.ms + retries x retry.backoff.ms",
            total,
            budget_seconds,
            "only max.block.ms + delivery.timeout.ms "
            f"({seconds_text(total)}) end the send: set them below the budget",
        ),
        *dead_broker_refresh(
            brokers,
            "socket.connection.setup.timeout.ms "
            f"({seconds_text(s.connection_setup_timeout_seconds)}, doubling up to "
            f"{seconds_text(s.connection_setup_timeout_max_seconds)})",
            s.metadata_max_age_seconds,
            "metadata.max.age.ms",
            "the Java client asks the least-loaded node and skips nodes in reconnect backoff, so "
            "this mostly hits when no connection is up.",
        ),
    )


_NOTES = (
    "a delivery callback that calls send().get() (or blocks otherwise) runs on the producer's "
    "only I/O thread: it waits on itself forever and every later send() fails after "
    "max.block.ms (seed S4); no setting shows that",
    "Future.get() without a timeout waits up to the worst case above",
)


def notes(s: JavaSettings) -> tuple[str, ...]:
    """Risks no Java setting shows (the same for every configuration)."""
    return _NOTES
