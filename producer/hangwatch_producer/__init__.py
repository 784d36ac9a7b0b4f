"""hangwatch's Kafka producer wrapper for PySpark tasks, with the telemetry the sidecar reads.

The `hangwatch-producer` distribution: what a Spark executor image needs to write to
Kafka through hangwatch (confluent-kafka and msgspec, Python 3.9 and later), nothing of
the sidecar or the operator. Inside `foreachPartition`, `mapPartitions` or
`foreachBatch` a job writes::

    import hangwatch_producer

    with hangwatch_producer.producer({"bootstrap.servers": brokers}) as p:
        for row in rows:
            p.send("events", row.value, key=row.key)

(`hangwatch_producer.producer` documents the guarantees.) Besides the wrapper it holds
the definitions both sides of the telemetry contract share, so they exist once: the
document and its files (`hangwatch_producer.wire.telemetry`, built from
`hangwatch_producer.wire.schema`), the directory's safe reads and liveness lock
(`telemetry_files`), secret redaction (`secrets`) and the one-line errors (`errors`).
The `hangwatch` distribution (sidecar, operator, reference pipeline) depends on this one
and imports them from here.
"""

from hangwatch_producer.ledger import Counters
from hangwatch_producer.producer import (
    CallbackError,
    DeliveryCallback,
    DeliveryFailed,
    HangwatchProducer,
    ProducerError,
    producer,
)
from hangwatch_producer.settings import ProducerSettings
from hangwatch_producer.version import __version__

__all__ = [
    "CallbackError",
    "Counters",
    "DeliveryCallback",
    "DeliveryFailed",
    "HangwatchProducer",
    "ProducerError",
    "ProducerSettings",
    "__version__",
    "producer",
]
