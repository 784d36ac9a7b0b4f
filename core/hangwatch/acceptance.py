"""Whether the cluster accepts a producer's writes to a partition: the arithmetic (pure).

A partition's leader takes a write from a producer with `acks=all` only while the
partition's in-sync replicas (ISR) number at least the topic's `min.insync.replicas`;
below it, every such write is answered `NOT_ENOUGH_REPLICAS`, which the clients retry
quietly until their own delivery timeout. A producer with `acks=0` or `acks=1` is not
held to it. This module is the one place that says so, for the sidecar's verdict
(`partitions_unwritable`), `hangwatch probe` and `hangwatch config-check`; the values
come from the cluster (Metadata's ISR, DescribeConfigs' `min.insync.replicas`) and from
the producer's telemetry (`hangwatch_producer.wire.telemetry.acks_value`). No I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

from hangwatch_producer.wire.telemetry import ACKS_ALL

MIN_INSYNC_KEY = "min.insync.replicas"
"""The topic config (and broker default) that sets how many in-sync replicas an
`acks=all` write needs."""

MAX_MIN_INSYNC = 2**31 - 1
"""Kafka keeps `min.insync.replicas` in an int; a larger answer is not a broker's."""

DEFAULT_ACKS = ACKS_ALL
"""The acks a producer whose settings do not say uses: librdkafka's default
(`request.required.acks=-1`) and the Java client's since 3.0 (KIP-679). Spark's Kafka
sink and a plain confluent-kafka producer, whose settings the sidecar cannot read, are
taken to use it."""

MIN_INSYNC_FROM_TOPIC = "topic"
"""`MinInsync.source` of a value the topic sets itself (DescribeConfigs source
DYNAMIC_TOPIC_CONFIG)."""
MIN_INSYNC_FROM_BROKER = "broker default"
"""`MinInsync.source` of a value the topic inherits (the brokers' default: the topic's
DescribeConfigs answer carries it, with a broker source)."""


@dataclass(frozen=True)
class MinInsync:
    """What the cluster said of one topic's `min.insync.replicas` (DescribeConfigs, as the
    sidecar's metadata client reads it)."""

    value: int | None
    """None: not known (`problem` says why)."""
    source: str = ""
    """`MIN_INSYNC_FROM_TOPIC` or `MIN_INSYNC_FROM_BROKER` when known."""
    problem: str = ""
    """Why it is not known: the request's error (a missing DESCRIBE_CONFIGS ACL, a broker
    without DescribeConfigs, no answer), or an answer that is not a number."""

    @property
    def known(self) -> bool:
        return self.value is not None


def parse_min_insync(value: object) -> int | None:
    """`min.insync.replicas` as a broker's DescribeConfigs answer gives it (a decimal
    string), or None when the answer is not one (missing, not a whole number, below 1 or
    beyond `MAX_MIN_INSYNC`): another program's text, never trusted."""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        return None
    text = str(value).strip()
    if not text.isascii() or not text.isdigit() or len(text) > 10:
        return None
    number = int(text)
    return number if 1 <= number <= MAX_MIN_INSYNC else None


def holds_to_min_insync(acks: int | None) -> bool:
    """Whether a producer with `acks` (None: its settings do not say, `DEFAULT_ACKS`)
    needs `min.insync.replicas` in-sync replicas for a write: only `acks=all`."""
    return (DEFAULT_ACKS if acks is None else acks) == ACKS_ALL


def refuses(isr: int, min_insync: int) -> bool:
    """Whether a partition with `isr` in-sync replicas refuses `acks=all` writes."""
    return isr < min_insync


def brokers_tolerated(replication_factor: int, min_insync: int) -> int:
    """How many replicas of a partition may be out (a broker stopped for maintenance, a
    follower fallen behind) before `acks=all` writes are refused: 0 means that one
    broker's maintenance refuses every write to the partitions it holds."""
    return max(0, replication_factor - min_insync)
