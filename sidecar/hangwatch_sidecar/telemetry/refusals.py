"""Refusal naming: which errors a producer's telemetry reports are refusals a restart
cannot fix, and the sentence and evidence that name each (pure).

`refusals` picks, from a producer's reported errors, those `hangwatch.kafka_errors`
classifies as met again by the next client (`Restart.MEETS_AGAIN`) that the producer still
meets and that have held long enough to name - plus the Java client's growing batch
splits, which stand for MESSAGE_TOO_LARGE. `absent_topics` names the producer's topics
the cluster's own metadata, fetched after its messages began to wait, does not have.
The telemetry's rules (`telemetry.judge`) turn either into `writes_rejected`.
"""

from __future__ import annotations

import datetime
from typing import Any

from hangwatch import kafka_errors
from hangwatch_sidecar.assessment import Thresholds
from hangwatch_sidecar.evidence import ClusterObservation, ErrorObserved, ProducerObservation
from hangwatch_sidecar.probe.types import UNKNOWN_TOPIC

SPLIT_REFUSAL = "MESSAGE_TOO_LARGE"
"""What a Java client's growing batch splits stand for (`kafka_errors`: meets again)."""
SPLIT_SOURCE = "batches the broker refused as too large, split by the Java client"

UNKNOWN_TOPIC_NAMES = frozenset({"UNKNOWN_TOPIC_OR_PARTITION", "_UNKNOWN_TOPIC"})
"""The error names (`kafka_errors`) a producer meets writing to a topic that does not exist."""

MAX_NAMED = 10
"""Refusals (and refused topics) a producer's evidence lists at most."""


def _stuck(producer: ProducerObservation, thresholds: Thresholds) -> bool:
    """The producer has delivered nothing for the stall threshold: its sends fail, or its
    messages wait with no delivery."""
    progress = producer.progress_age_seconds
    return producer.failing_seconds > thresholds.stall_seconds or (
        producer.pending > 0
        and producer.pending_seconds > thresholds.stall_seconds
        and (progress is None or progress > thresholds.stall_seconds)
    )


def _names_a_refusal(
    error: ErrorObserved,
    producer: ProducerObservation,
    thresholds: Thresholds,
    absent: frozenset[str],
    stuck: bool,
) -> bool:
    """`error` is a refusal the next client meets again, still met and held long enough."""
    info = kafka_errors.by_name(error.code)
    confirmed = error.topic in absent and info is not None and info.name in UNKNOWN_TOPIC_NAMES
    if info is None or (info.restart is not kafka_errors.Restart.MEETS_AGAIN and not confirmed):
        return False
    first, progress = error.first_age_seconds, producer.progress_age_seconds
    undelivered = producer.pending > 0 and (
        progress is None or (first is not None and progress >= first)
    )
    window = max(thresholds.stall_seconds, thresholds.heartbeat_seconds)
    if error.last_age_seconds > window and not undelivered:
        return False
    return stuck or (first is not None and first >= thresholds.stall_seconds)


def refusals(
    producer: ProducerObservation,
    thresholds: Thresholds,
    absent: frozenset[str] = frozenset(),
) -> list[ErrorObserved]:
    """The refusals a restart cannot fix (`kafka_errors.Restart.MEETS_AGAIN`) that this
    producer still meets and that have held long enough to name. An unknown-topic error,
    which the code alone does not classify (the topic may be being created), is one when
    its topic is among `absent`: the cluster's own metadata does not have it either.

    Still met: seen within the stall threshold, or nothing delivered since the first one
    while messages wait. Held: since the stall threshold, or the producer has delivered
    nothing for it (its messages pending or its sends failing) - the same evidence the
    restart verdicts wait for, so a refusal is named no later than they would be."""
    stuck = _stuck(producer, thresholds)
    found = [e for e in producer.errors if _names_a_refusal(e, producer, thresholds, absent, stuck)]
    return found + _split_refusals(producer, thresholds, stuck, found)


def _split_refusals(
    producer: ProducerObservation,
    thresholds: Thresholds,
    stuck: bool,
    found: list[ErrorObserved],
) -> list[ErrorObserved]:
    """The Java client splits a batch only when the broker answers MESSAGE_TOO_LARGE, and
    splits it to no less than its batch size: records above the topic's limit are split
    again until `delivery.timeout.ms` expires them, so the failures name a batch expiry,
    never the refusal (KAFKA-8350). Splits still growing while nothing is delivered are
    the refusal."""
    split = producer.splits
    window = max(thresholds.stall_seconds, thresholds.heartbeat_seconds)
    if not stuck or split is None or split.last_age_seconds > window:
        return []
    topics = sorted({e.topic for e in producer.errors if e.topic}) or sorted(producer.topics)
    return [
        ErrorObserved(
            code=SPLIT_REFUSAL,
            topic=topic,
            count=split.count,
            last_age_seconds=split.last_age_seconds,
            first_age_seconds=split.first_age_seconds,
            first_ts=split.first_ts,
            source=SPLIT_SOURCE,
        )
        for topic in (topics[:MAX_NAMED] or [""])
        if not any(e.topic == topic and e.code == SPLIT_REFUSAL for e in found)
    ]


def absent_topics(producer: ProducerObservation, cluster: ClusterObservation) -> list[str]:
    """The producer's topics the cluster's metadata says do not exist, when that metadata
    was fetched after its messages began to wait (older metadata may predate a topic
    created since: it proves nothing about the wait)."""
    age = cluster.metadata_age_seconds
    if age is None or age >= producer.pending_seconds:
        return []
    return cluster.absent_for(producer.topics)


def absent_reason(topic: str, producer: ProducerObservation, age: float) -> str:
    """Why a wait for `topic`, which the cluster's metadata (`age` s old) lacks, is refused."""
    return (
        f"writes to topic {topic} refused: {UNKNOWN_TOPIC}, the cluster's metadata "
        f"({age:.0f} s old, fetched after the wait began) does not list the topic while "
        f"{producer.pending} messages have waited {producer.pending_seconds:.0f} s for it; "
        "the next producer meets the same refusal, a restart cannot help"
        + kafka_errors.hint_clause(kafka_errors.by_name("_UNKNOWN_TOPIC"))
    )


def refusal_reason(error: ErrorObserved, absent: bool = False) -> str:
    """The sentence naming one refusal: where, which error, how often, since when, a hint
    (`absent`: the cluster's metadata lacks the topic too, which is what classifies it)."""
    info = kafka_errors.by_name(error.code)
    name = error.code if info is None or info.name == error.code else f"{error.code} ({info.name})"
    if absent:  # the code alone does not tell; the cluster's metadata does
        info = kafka_errors.by_name("_UNKNOWN_TOPIC")
    where = f"writes to topic {error.topic}" if error.topic else "the producer's connections"
    if absent:
        where += " (not in the cluster's metadata either)"
    since = ""
    if error.first_ts is not None:
        stamp = datetime.datetime.fromtimestamp(error.first_ts, datetime.UTC)
        since = f" since {stamp.strftime('%Y-%m-%dT%H:%M:%SZ')}"
    if error.first_age_seconds is not None:
        since += f" ({error.first_age_seconds:.0f} s ago)"
    times = f"{error.count} times" if not error.source else f"{error.count} {error.source}"
    return (
        f"{where} refused: {name}, {times}{since}, last {error.last_age_seconds:.0f} "
        "s ago; the next producer meets the same refusal, a restart cannot help"
        + kafka_errors.hint_clause(info)
    )


def refusal_evidence(error: ErrorObserved) -> dict[str, Any]:
    """One refusal in a producer's evidence (`writes_rejected`)."""
    return {
        "topic": error.topic or None,
        "error": error.code,
        "count": error.count,
        "first_ts": error.first_ts,
        "last_age_seconds": round(error.last_age_seconds, 1),
    }
