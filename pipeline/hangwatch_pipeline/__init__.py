"""The PySpark side of hangwatch: producer wrapper with telemetry, reference pipeline,
time-to-error check.
"""

from hangwatch_pipeline.ledger import Counters
from hangwatch_pipeline.producer import (
    CallbackError,
    DeliveryCallback,
    DeliveryFailed,
    HangwatchProducer,
    ProducerError,
    producer,
)
from hangwatch_pipeline.settings import ProducerSettings

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
