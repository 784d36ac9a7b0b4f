"""The librdkafka model: message.timeout.ms bounds everything, plus a 1 s expiry scan.

Covers: defaults (300 s + 1 s); `delivery.timeout.ms` is an alias and the later of the
two wins; a transactional producer takes `transaction.timeout.ms` when
`message.timeout.ms` is unset; `message.timeout.ms=0` is unbounded; retries, socket and
connect timeouts do not move the figure; the broker count comes from
`bootstrap.servers` (distinct entries), `metadata.broker.list` or `--brokers`.
"""

from __future__ import annotations

import math

from hangwatch.time_to_error import librdkafka, models
from hangwatch.time_to_error.estimate import worst_case_of
from tests.config_check.helpers import worst_cases

NOT_BOUNDING = {
    "retries": "0",
    "socket.timeout.ms": "300000",
    "socket.connection.setup.timeout.ms": "120000",
    "retry.backoff.ms": "5000",
}
"""Retries, socket and connect timeouts: message.timeout.ms bounds a send whatever they are."""


def test_defaults_are_five_minutes_and_the_scan() -> None:
    estimate = worst_case_of(librdkafka, {}, brokers=1)
    assert estimate.total_seconds == 301
    assert estimate.formula == "message.timeout.ms + expiry scan interval"


@worst_cases(
    {
        "delivery-timeout-is-an-alias-and-the-later-wins": (
            {"message.timeout.ms": "5000", "delivery.timeout.ms": "20000"},
            1,
            21,
        ),
        "message-timeout-set-later-wins": (
            {"delivery.timeout.ms": "20000", "message.timeout.ms": "5000"},
            1,
            6,
        ),
        "retries-and-socket-timeouts-do-not-move-the-figure": (
            {"message.timeout.ms": "10000", **NOT_BOUNDING},
            3,
            11,
        ),
    }
)
def test_configured_worst_case(config: dict[str, str], brokers: int, total_seconds: int) -> None:
    assert worst_case_of(librdkafka, config, brokers=brokers).total_seconds == total_seconds


def test_transactional_producer_follows_transaction_timeout() -> None:
    estimate = worst_case_of(librdkafka, {"transactional.id": "tx"}, brokers=1)
    assert estimate.total_seconds == 61
    assert estimate.terms[0].keys == ("transaction.timeout.ms",)


def test_zero_message_timeout_is_unbounded() -> None:
    estimate = worst_case_of(librdkafka, {"message.timeout.ms": "0"}, brokers=1)
    assert estimate.unbounded
    assert math.isinf(estimate.total_seconds)
    assert estimate.exceeds(10**9)


def test_broker_count_from_bootstrap_entries_or_flag() -> None:
    listed = {"bootstrap.servers": "a:9092, b:9092,a:9092,c:9092"}
    assert models.worst_case("librdkafka", listed).brokers == 3
    legacy = {"metadata.broker.list": "a:9092,b:9092"}
    assert models.worst_case("librdkafka", legacy).brokers == 2
    flagged = models.worst_case("librdkafka", listed, brokers=6)
    assert flagged.brokers == 6
    assert flagged.assumptions[0].startswith("6 broker(s) blackholed, from --brokers")
    assert models.worst_case("librdkafka", {}).brokers == 1
