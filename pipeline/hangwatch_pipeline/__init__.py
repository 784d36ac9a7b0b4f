"""The PySpark side of hangwatch: the reference pipeline, Spark's Kafka sink, the
time-to-error check.

The producer wrapper itself is the `hangwatch-producer` distribution
(`hangwatch_producer`, installable alone in executor images); its public names are
re-exported here, so `hangwatch_pipeline.producer(...)` keeps working.
"""

from hangwatch_producer import (
    CallbackError,
    Counters,
    DeliveryCallback,
    DeliveryFailed,
    HangwatchProducer,
    ProducerError,
    ProducerSettings,
    producer,
)

__all__ = [
    "CallbackError",
    "Counters",
    "DeliveryCallback",
    "DeliveryFailed",
    "HangwatchProducer",
    "ProducerError",
    "ProducerSettings",
    "producer",
]
