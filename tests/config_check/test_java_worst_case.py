"""The Java model: max.block.ms plus delivery.timeout.ms, as kafka-clients applies them.

Covers: defaults (60 s + 120 s); explicit values; a default `delivery.timeout.ms` below
`linger.ms + request.timeout.ms` is raised to that sum while an explicit one is refused
(as `KafkaProducer.configureDeliveryTimeout` does); `delivery.timeout.ms` at INT32_MAX
is unbounded; Spark's `kafka.` option prefix is accepted; security keys are accepted
and ignored; idempotence defaults on but is off when `acks` conflicts.
"""

from __future__ import annotations

import pytest

from hangwatch.time_to_error import java
from hangwatch.time_to_error.estimate import ClientSettingsError, worst_case_of
from tests.config_check.helpers import worst_cases


def test_defaults_are_max_block_plus_delivery_timeout() -> None:
    estimate = worst_case_of(java, {}, brokers=1)
    assert estimate.total_seconds == 180
    assert estimate.formula == "max.block.ms + delivery.timeout.ms"


@worst_cases(
    {
        "explicit-values": (
            {"max.block.ms": "5000", "delivery.timeout.ms": "20000", "request.timeout.ms": "10000"},
            1,
            25,
        ),
        "spark-prefix-and-security-keys-are-accepted": (
            {
                "kafka.bootstrap.servers": "a:9092,b:9092",
                "kafka.delivery.timeout.ms": "30000",
                "kafka.sasl.jaas.config": "org.apache...PlainLoginModule required;",
                "ssl.truststore.location": "/etc/kafka/truststore.jks",
            },
            2,
            90,
        ),
    }
)
def test_configured_worst_case(config: dict[str, str], brokers: int, total_seconds: int) -> None:
    assert worst_case_of(java, config, brokers=brokers).total_seconds == total_seconds


def test_default_delivery_timeout_is_raised_to_linger_plus_request_timeout() -> None:
    config = {"request.timeout.ms": "150000", "linger.ms": "100"}
    estimate = worst_case_of(java, config, brokers=1)
    assert estimate.total_seconds == pytest.approx(60 + 150.1)
    assert "raised to linger.ms + request.timeout.ms" in estimate.terms[1].values


def test_explicit_delivery_timeout_below_request_timeout_is_refused() -> None:
    config = {"delivery.timeout.ms": "20000", "request.timeout.ms": "30000"}
    with pytest.raises(ClientSettingsError, match=r"delivery\.timeout\.ms \(20000 ms\) must be >="):
        worst_case_of(java, config, brokers=1)


def test_int32_max_delivery_timeout_is_unbounded() -> None:
    estimate = worst_case_of(java, {"delivery.timeout.ms": "2147483647"}, brokers=1)
    assert estimate.unbounded


def test_idempotence_defaults_on_unless_acks_conflict() -> None:
    assert java.parse_settings({}).idempotent
    assert not java.parse_settings({"acks": "1"}).idempotent
    assert java.parse_settings({"acks": "1", "enable.idempotence": "true"}).idempotent
