"""Risky settings produce warnings with stable codes; safe ones do not.

Covers: `unbounded-wait` (librdkafka `message.timeout.ms=0`, Java `max.block.ms` at
INT32_MAX); `retries-exceed-budget` (sarama's retry through a 3-broker refresh over a
60 s budget; not without a budget, not when an overall cap is within it);
`metadata-refresh-dead-broker` for every client once the bootstrap list has more than
one entry, naming the connect timeout and the refresh interval (seed S3);
`idempotence-unbounded-retries` (librdkafka idempotence with an infinite message
timeout, Java's default idempotence with a delivery timeout over the budget); notes
that no setting shows (Java S4 callback `get()`, sarama S2 idempotent hang).
"""

from __future__ import annotations

import pytest

from hangwatch.time_to_error import models
from hangwatch.time_to_error.estimate import Code, Estimate

THREE = "k1:9092,k2:9092,k3:9092"


def codes(estimate: Estimate) -> list[str]:
    return [f.code for f in estimate.findings]


def test_infinite_message_timeout_is_an_unbounded_wait() -> None:
    estimate = models.worst_case("librdkafka", {"message.timeout.ms": "0"})
    assert codes(estimate) == [Code.UNBOUNDED_WAIT]
    assert "never returns" in estimate.findings[0].message


def test_java_max_block_at_int32_max_is_an_unbounded_wait() -> None:
    estimate = models.worst_case("java", {"max.block.ms": "2147483647"})
    assert Code.UNBOUNDED_WAIT in codes(estimate)
    assert "max.block.ms" in estimate.findings[0].message


def test_sarama_retry_chain_over_budget() -> None:
    config = {"Net.WriteTimeout": "3s", "Producer.Retry.Max": "1", "Addrs": THREE}
    over = models.worst_case("sarama", config, budget_seconds=60)
    assert Code.RETRIES_EXCEED_BUDGET in codes(over)
    message = next(f.message for f in over.findings if f.code == Code.RETRIES_EXCEED_BUDGET)
    assert "360.85 s, over the 60 s budget" in message
    assert Code.RETRIES_EXCEED_BUDGET not in codes(models.worst_case("sarama", config))


def test_retries_capped_within_budget_are_not_flagged() -> None:
    config = {"message.timeout.ms": "20000", "retries": "1000"}
    estimate = models.worst_case("librdkafka", config, budget_seconds=30)
    assert codes(estimate) == []


@pytest.mark.parametrize(
    ("client", "config", "stall", "interval"),
    [
        ("librdkafka", {"bootstrap.servers": THREE}, "(30 s)", "(300 s)"),
        ("java", {"bootstrap.servers": THREE}, "(10 s, doubling up to 30 s)", "(300 s)"),
        ("sarama", {"Addrs": THREE}, "Net.DialTimeout (30 s)", "(600 s)"),
    ],
)
def test_several_brokers_warn_of_dead_broker_refresh(
    client: str, config: dict[str, str], stall: str, interval: str
) -> None:
    estimate = models.worst_case(client, config)
    found = [f for f in estimate.findings if f.code == Code.METADATA_REFRESH_DEAD_BROKER]
    assert len(found) == 1
    assert stall in found[0].message and interval in found[0].message
    assert "seed S3" in found[0].message
    one = {key: "k1:9092" for key in config}
    assert Code.METADATA_REFRESH_DEAD_BROKER not in codes(models.worst_case(client, one))


def test_disabled_periodic_refresh_is_said() -> None:
    config = {"bootstrap.servers": THREE, "topic.metadata.refresh.interval.ms": "-1"}
    message = models.worst_case("librdkafka", config).findings[0].message
    assert "only on errors" in message


def test_idempotence_with_unlimited_retries() -> None:
    infinite = {"enable.idempotence": "true", "message.timeout.ms": "0"}
    assert Code.IDEMPOTENCE_UNBOUNDED_RETRIES in codes(models.worst_case("librdkafka", infinite))
    java_over = models.worst_case("java", {}, budget_seconds=60)
    assert Code.IDEMPOTENCE_UNBOUNDED_RETRIES in codes(java_over)
    java_within = models.worst_case("java", {}, budget_seconds=600)
    assert Code.IDEMPOTENCE_UNBOUNDED_RETRIES not in codes(java_within)


def test_notes_for_risks_no_setting_shows() -> None:
    assert any("seed S4" in n for n in models.worst_case("java", {}).notes)
    sarama = models.worst_case("sarama", {"Producer.Idempotent": "true"})
    assert any("seed S2" in n for n in sarama.notes)
    assert not any("seed S2" in n for n in models.worst_case("sarama", {}).notes)
