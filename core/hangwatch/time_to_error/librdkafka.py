"""Worst-case time-to-error of a librdkafka (confluent-kafka) producer with brokers blackholed.

librdkafka fails a message once `message.timeout.ms` (alias `delivery.timeout.ms`,
default 300000, 0 = infinite) has passed since `produce()`, retries included; it
checks queued and in-flight messages for expiry once a second. Measured in the lab
(confluent-kafka 2.16.1, all 3 brokers blackholed by netfilter): with
`message.timeout.ms=4000` the delivery reports came 4.0-4.98 s after `produce()`.
`socket.connection.setup.timeout.ms` (30000), `socket.timeout.ms` (60000), `retries`
(INT32_MAX) and `retry.backoff.ms` (100) shape the attempts but can only end a send
earlier; `request.timeout.ms` (30000) is enforced by the broker. Defaults and
semantics from librdkafka's CONFIGURATION.md (confluentinc/librdkafka, the table this
module's DEFAULTS copy). Keys are validated by librdkafka itself (`rdkafka_conf`), so
this model ignores keys it does not read.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from hangwatch.time_to_error.client_config import boolean, integer
from hangwatch.time_to_error.estimate import (
    INT32_MAX,
    Code,
    ConfigFinding,
    Term,
    dead_broker_refresh,
    retries_over_budget,
    seconds_text,
    unlimited_idempotent_retries,
)
from hangwatch_producer.wire.telemetry import ACKS_ALL, acks_of

CLIENT = "librdkafka"

DEFAULTS = {
    "message.timeout.ms": 300000,
    "transaction.timeout.ms": 60000,
    "socket.timeout.ms": 60000,
    "socket.connection.setup.timeout.ms": 30000,
    "message.send.max.retries": INT32_MAX,
    "retry.backoff.ms": 100,
    "topic.metadata.refresh.interval.ms": 300000,
    "queue.buffering.max.messages": 100000,
}
"""librdkafka's documented defaults (CONFIGURATION.md) for the settings the model reads."""

ALIASES = {
    "delivery.timeout.ms": "message.timeout.ms",
    "retries": "message.send.max.retries",
    "metadata.broker.list": "bootstrap.servers",
}
"""Alias -> the name the model uses (librdkafka treats both alike); the later one set wins."""

BOOTSTRAP_KEY = "bootstrap.servers"

EXPIRY_SCAN_SECONDS = 1.0
"""librdkafka scans for expired messages once a second (rdkafka_broker.c, 1000000 us)."""


@dataclass(frozen=True)
class LibrdkafkaSettings:
    """The librdkafka settings that decide how long a send to a blackholed cluster waits."""

    message_timeout_seconds: float
    """message.timeout.ms (300 s; 0 = infinite): the one deadline of a message, retries included."""
    message_timeout_key: str
    """Which key set it: transaction.timeout.ms stands in for it on a transactional producer."""
    socket_timeout_seconds: float
    """socket.timeout.ms (60 s): one request's wait, capped by the message's remaining time."""
    connection_setup_timeout_seconds: float
    """socket.connection.setup.timeout.ms (30 s): one connect to a dead host waits this long."""
    retries: int
    """message.send.max.retries / retries (INT32_MAX, which idempotence requires unless set)."""
    retry_backoff_seconds: float
    """retry.backoff.ms (100 ms): first backoff, doubling up to retry.backoff.max.ms."""
    metadata_refresh_interval_seconds: float | None
    """topic.metadata.refresh.interval.ms (300 s; -1 = off): periodic metadata refresh."""
    idempotent: bool
    """enable.idempotence (false; implied by transactional.id): retries stay at INT32_MAX."""
    queue_max_messages: int
    """queue.buffering.max.messages (100000): beyond it produce() raises BufferError at once."""


def canonical(config: Mapping[str, str]) -> dict[str, str]:
    """`config` with aliases folded into their canonical names, in order."""
    return {ALIASES.get(key, key): value for key, value in config.items()}


def acks(config: Mapping[str, str]) -> int:
    """The producer's acks (-1: all): `acks` / `request.required.acks`, all when
    `enable.idempotence` is set (librdkafka forces it), else librdkafka's default, all."""
    found = acks_of(canonical(config))
    return ACKS_ALL if found is None else found


def _seconds(config: Mapping[str, str], key: str) -> float:
    return integer(config, key, DEFAULTS[key]) / 1000


def _message_timeout(c: Mapping[str, str]) -> tuple[float, str]:
    key = "message.timeout.ms"
    if "transactional.id" in c and key not in c:
        key = "transaction.timeout.ms"
    millis = integer(c, key, DEFAULTS[key])
    return (math.inf if millis == 0 else millis / 1000), key


def parse_settings(config: Mapping[str, str]) -> LibrdkafkaSettings:
    """Typed settings from librdkafka property strings (defaults filled in)."""
    c = canonical(config)
    timeout_seconds, timeout_key = _message_timeout(c)
    refresh_key = "topic.metadata.refresh.interval.ms"
    refresh_ms = integer(c, refresh_key, DEFAULTS[refresh_key], minimum=-1)
    return LibrdkafkaSettings(
        message_timeout_seconds=timeout_seconds,
        message_timeout_key=timeout_key,
        socket_timeout_seconds=_seconds(c, "socket.timeout.ms"),
        connection_setup_timeout_seconds=_seconds(c, "socket.connection.setup.timeout.ms"),
        retries=integer(c, "message.send.max.retries", DEFAULTS["message.send.max.retries"]),
        retry_backoff_seconds=_seconds(c, "retry.backoff.ms"),
        metadata_refresh_interval_seconds=None if refresh_ms < 0 else refresh_ms / 1000,
        idempotent=boolean(c, "enable.idempotence", default=False) or "transactional.id" in c,
        queue_max_messages=integer(
            c, "queue.buffering.max.messages", DEFAULTS["queue.buffering.max.messages"]
        ),
    )


def terms(s: LibrdkafkaSettings, brokers: int) -> tuple[Term, ...]:
    """The message deadline plus the granularity at which librdkafka notices it."""
    deadline = Term(
        "message timeout",
        s.message_timeout_seconds,
        s.message_timeout_key,
        "0 (infinite)"
        if math.isinf(s.message_timeout_seconds)
        else f"{round(s.message_timeout_seconds * 1000)} ms",
        (s.message_timeout_key,),
    )
    scan = Term(
        "expiry scan interval",
        EXPIRY_SCAN_SECONDS,
        "expiry scan interval",
        "1 s (librdkafka checks for expired messages once a second)",
        (),
    )
    return (deadline, scan)


def assumptions(s: LibrdkafkaSettings, brokers: int) -> tuple[str, ...]:
    """What the librdkafka model takes for granted, printed with every estimate."""
    found = [
        "librdkafka producer (confluent-kafka); every broker blackholed; defaults from "
        "librdkafka's CONFIGURATION.md",
        f"{s.message_timeout_key} bounds a message from produce() to its delivery report, "
        "retries included; measured in the lab with confluent-kafka 2.16.1: "
        "message.timeout.ms=4000 reported after 4.0-4.98 s",
        "connects (socket.connection.setup.timeout.ms "
        f"{seconds_text(s.connection_setup_timeout_seconds)}), requests (socket.timeout.ms "
        f"{seconds_text(s.socket_timeout_seconds)}) and retries ({s.retries}) can only end a "
        "send earlier; request.timeout.ms is the broker's wait for acks",
        "the report reaches the application only through poll() or flush()",
    ]
    if s.message_timeout_key == "transaction.timeout.ms":
        found.append("transactional.id is set: message.timeout.ms follows transaction.timeout.ms")
    return tuple(found)


def _unbounded(s: LibrdkafkaSettings) -> tuple[ConfigFinding, ...]:
    if not math.isinf(s.message_timeout_seconds):
        return ()
    message = (
        f"{s.message_timeout_key}=0 disables the only delivery deadline: with the brokers "
        "blackholed a message is never failed and flush() without a timeout never returns"
    )
    return (ConfigFinding(Code.UNBOUNDED_WAIT, message),)


def findings(
    s: LibrdkafkaSettings, parts: tuple[Term, ...], brokers: int, budget_seconds: float | None
) -> tuple[ConfigFinding, ...]:
    """Risky settings of this configuration (worst case: the sum of `parts`), worst first."""
    total = sum(t.seconds for t in parts)
    retries = s.retries
    chain = (retries + 1) * s.socket_timeout_seconds + retries * s.retry_backoff_seconds
    key = s.message_timeout_key
    return (
        *_unbounded(s),
        *unlimited_idempotent_retries(
            s.idempotent, retries, key, s.message_timeout_seconds, budget_seconds
        ),
        *retries_over_budget(
            chain,
            f"(retries {retries} + 1) x socket.timeout.ms + retries x retry.backoff.ms",
            total,
            budget_seconds,
            f"only {key} ({seconds_text(s.message_timeout_seconds)}) ends the send: "
            "set it below the budget",
        ),
        *dead_broker_refresh(
            brokers,
            "socket.connection.setup.timeout.ms "
            f"({seconds_text(s.connection_setup_timeout_seconds)})",
            s.metadata_refresh_interval_seconds,
            "topic.metadata.refresh.interval.ms",
            "librdkafka prefers a broker it is connected to, so this mostly hits at start-up "
            "and after a re-bootstrap.",
        ),
    )


def notes(s: LibrdkafkaSettings) -> tuple[str, ...]:
    """Application-side waits the configuration cannot show."""
    return (
        "flush() or poll() without a timeout waits up to the worst case above",
        "produce() never blocks: a full queue (queue.buffering.max.messages="
        f"{s.queue_max_messages} or queue.buffering.max.kbytes) raises BufferError at once; "
        "a loop that retries produce() must call poll() or it spins",
    )
