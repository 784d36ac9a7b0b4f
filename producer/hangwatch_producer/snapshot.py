"""What a producer reports about itself at one instant: the input of its telemetry document.

At open and after every librdkafka statistics event, the telemetry publisher
(`hangwatch_producer.publisher`) asks the producer for a `Snapshot`, which
`build_snapshot` assembles from three sources: the `ProducerFacts` fixed when the
producer opened (identity, redacted configuration, its bounded timeouts), the delivery
ledger's numbers, and the callback runner's `CallbackStatus`. The publisher then hands
it to `hangwatch_producer.telemetry.encode_document`, which turns it into the wire
document (`hangwatch_producer.wire.telemetry`); docs/telemetry.md describes every field.

Pure: no I/O, no clock (callers pass the times), no threads.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from hangwatch_producer.ledger import Counters, DeliveryLedger, ErrorSeen, ThrottleSeen


@dataclass(frozen=True)
class Snapshot:
    """Everything the wrapper knows about one producer at one instant (no statistics)."""

    seq: int
    ts: float
    monotonic: float
    started_ts: float
    interval_seconds: float
    state: str
    identity: Mapping[str, Any]
    counters: Mapping[str, int]
    last_delivery_ts: float | None
    last_error: Mapping[str, Any] | None
    error_counts: Mapping[str, int]
    callbacks: Mapping[str, Any]
    config: Mapping[str, Any]
    wrapper: Mapping[str, Any]
    bootstrap: list[str]
    topics: list[str]
    stats_received_ts: float | None = None
    errors_seen: list[ErrorSeen] = field(default_factory=list)
    """Per topic and code, most recently met first."""
    throttle: ThrottleSeen | None = None


@dataclass(frozen=True)
class ProducerFacts:
    """What does not change while a producer lives (the document's fixed parts)."""

    identity: Mapping[str, Any]
    """The `identity` object: pod, Spark application and task, process, client id."""
    config: Mapping[str, Any]
    """The librdkafka configuration, secrets redacted, values bounded."""
    wrapper: Mapping[str, Any]
    """Wrapper version and its own bounded timeouts."""
    bootstrap: list[str]
    started_ts: float
    interval_seconds: float
    """`statistics.interval.ms` in seconds: the heartbeat period (0 when telemetry is off)."""


@dataclass(frozen=True)
class CallbackStatus:
    """The job's callbacks on the callback thread (the document's `callbacks`)."""

    pending: int
    """Queued or running."""
    running_seconds: float | None
    """How long the one running now has run; None when none runs."""
    completed: int
    errors: int
    """Callbacks that raised."""


def build_snapshot(
    facts: ProducerFacts,
    *,
    seq: int,
    state: str,
    counters: Counters,
    ledger: DeliveryLedger,
    callbacks: CallbackStatus,
    ts: float,
    monotonic: float,
    stats_received_ts: float | None,
) -> Snapshot:
    """The snapshot number `seq`, taken at wall time `ts` and `monotonic` clock time."""
    return Snapshot(
        seq=seq,
        ts=ts,
        monotonic=monotonic,
        started_ts=facts.started_ts,
        interval_seconds=facts.interval_seconds,
        state=state,
        identity=facts.identity,
        counters={**asdict(counters), "unacknowledged": counters.unacknowledged},
        last_delivery_ts=ledger.last_delivery_ts,
        last_error=ledger.last_error,
        error_counts=dict(ledger.error_counts),
        errors_seen=sorted(ledger.errors_seen.values(), key=lambda e: -e.last_ts),
        throttle=ledger.throttle,
        callbacks=asdict(callbacks),
        config=facts.config,
        wrapper=facts.wrapper,
        bootstrap=facts.bootstrap,
        topics=list(ledger.topics),
        stats_received_ts=stats_received_ts,
    )
