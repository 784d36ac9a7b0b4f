"""Record sizes the cluster or the client is certain to refuse (pure; `config-check`).

A record larger than the producer's own limit is refused by the client at `send()`
(librdkafka `message.max.bytes`, Java `max.request.size`, sarama
`Producer.MaxMessageBytes`); one larger than the topic's `max.message.bytes` is refused
by the broker (`MSG_SIZE_TOO_LARGE` / `RecordTooLargeException`), every time, by every
executor: the sidecar calls that `writes_rejected` and never restarts for it
(`hangwatch.kafka_errors`). Both compare the record with Kafka's batch framing around
it (a v2 batch holding that one record), before compression.
"""

from __future__ import annotations

from collections.abc import Mapping

from hangwatch.time_to_error import java, librdkafka, sarama
from hangwatch.time_to_error.client_config import integer
from hangwatch.time_to_error.estimate import Code, ConfigFinding

BATCH_OVERHEAD = 61
"""Bytes of a v2 record batch's header (Apache Kafka `DefaultRecordBatch.RECORD_BATCH_OVERHEAD`)."""
RECORD_OVERHEAD = 21
"""Most bytes of one record's own framing (`DefaultRecord.MAX_RECORD_OVERHEAD`)."""

PRODUCER_LIMITS: dict[str, tuple[str, int]] = {
    "librdkafka": ("message.max.bytes", 1_000_000),
    "java": ("max.request.size", 1_048_576),
    "sarama": ("Producer.MaxMessageBytes", 1_000_000),
}
"""The producer's own largest request or message, and the client's default."""

_CANONICAL = {
    "librdkafka": librdkafka.canonical,
    "java": java.canonical,
    "sarama": sarama.canonical,
}


def framed(record_bytes: int) -> int:
    """The size of a batch holding one record of `record_bytes` (key, value, headers)."""
    return record_bytes + BATCH_OVERHEAD + RECORD_OVERHEAD


def size_findings(
    client: str,
    config: Mapping[str, str],
    record_bytes: int | None,
    topic_max_message_bytes: int | None,
) -> tuple[ConfigFinding, ...]:
    """Warnings for a record of `record_bytes` that a limit is certain to refuse."""
    if record_bytes is None:
        return ()
    key, default = PRODUCER_LIMITS[client]
    limit = integer(_CANONICAL[client](config), key, default, minimum=1)
    size = framed(record_bytes)
    compressed = any(
        config.get(k, "none").strip().lower() not in ("none", "")
        for k in ("compression.type", "compression.codec", "kafka.compression.type")
    )
    before = " before compression (compression may bring it under)" if compressed else ""
    found = []
    if size > limit:
        found.append(
            ConfigFinding(
                Code.RECORD_ABOVE_PRODUCER_LIMIT,
                f"a {record_bytes}-byte record is {size} bytes in its batch{before}, above the "
                f"producer's {key}={limit}: the client refuses every such send "
                "(MSG_SIZE_TOO_LARGE / RecordTooLargeException); raise it or shrink the records",
            )
        )
    if topic_max_message_bytes is not None and size > topic_max_message_bytes:
        found.append(
            ConfigFinding(
                Code.RECORD_ABOVE_TOPIC_LIMIT,
                f"a {record_bytes}-byte record is {size} bytes in its batch{before}, above the "
                f"topic's max.message.bytes={topic_max_message_bytes}: the broker refuses every "
                "such write (MSG_SIZE_TOO_LARGE / RecordTooLargeException), every executor "
                "alike; hangwatch reports writes_rejected and never restarts for it",
            )
        )
    return tuple(found)
