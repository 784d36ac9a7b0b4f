"""The sarama model reproduces seed S0 and the 3-broker observation.

Covers: one broker, `Net.WriteTimeout=3s`, `Producer.Retry.Max=1` gives the seed's
3 s + 4 x 30 s = 123 s (plus 0.85 s of backoffs the seed's formula leaves out);
`Producer.Retry.Max=0` gives the seed's 3 s; three blackholed brokers (from `Addrs` or
`--brokers`) give more than the >195 s a real sarama 1.22.1 SyncProducer stayed
silent; the retry count above 1 does not change the figure; `Metadata.Retry.Max` and
`Metadata.Timeout` do; the CLI prints the S0 figure first.
"""

from __future__ import annotations

import pytest

from hangwatch.time_to_error import models, sarama
from hangwatch.time_to_error.estimate import worst_case_of
from tests.config_check.helpers import run_cli

FIRST_LINE = "worst case until a send reports an error"
SEED_S0 = {"Net.WriteTimeout": "3s", "Producer.Retry.Max": "1", "Producer.Timeout": "10ms"}


def test_one_broker_is_write_timeout_plus_four_dial_timeouts() -> None:
    estimate = worst_case_of(sarama, SEED_S0, brokers=1)
    by_name = {t.name: t.seconds for t in estimate.terms}
    assert by_name["in-flight produce fails"] + by_name["metadata refresh connects"] == 123
    assert by_name["metadata refresh connects"] == 4 * 30
    assert estimate.total_seconds == pytest.approx(123.85)


def test_no_retry_reports_after_the_write_timeout() -> None:
    estimate = worst_case_of(sarama, {**SEED_S0, "Producer.Retry.Max": "0"}, brokers=1)
    assert estimate.total_seconds == 3
    assert estimate.formula == "Net.WriteTimeout"


def test_three_blackholed_brokers_stay_silent_longer_than_observed() -> None:
    config = {**SEED_S0, "Addrs": "k1:9092,k2:9092,k3:9092"}
    estimate = models.worst_case("sarama", config)
    assert estimate.brokers == 3
    assert estimate.total_seconds > 195
    assert estimate.total_seconds == pytest.approx(3 + 0.1 + 4 * 3 * 30 + 3 * 0.25)
    assert "3 broker(s) blackholed, one per distinct Addrs entry" in estimate.assumptions[0]


def test_more_producer_retries_do_not_add_refreshes() -> None:
    once = worst_case_of(sarama, SEED_S0, brokers=3)
    many = worst_case_of(sarama, {**SEED_S0, "Producer.Retry.Max": "10"}, brokers=3)
    assert many.total_seconds == once.total_seconds


def test_metadata_retries_set_the_number_of_walks() -> None:
    estimate = worst_case_of(sarama, {**SEED_S0, "Metadata.Retry.Max": "1"}, brokers=2)
    assert estimate.total_seconds == pytest.approx(3 + 0.1 + 2 * 2 * 30 + 1 * 0.25)


def test_metadata_timeout_cuts_the_refresh_after_one_more_connect() -> None:
    estimate = worst_case_of(sarama, {**SEED_S0, "Metadata.Timeout": "45s"}, brokers=3)
    assert estimate.total_seconds == pytest.approx(3 + 0.1 + 45 + 30)
    assert "Metadata.Timeout" in estimate.formula


def test_cli_prints_the_seed_figure_first() -> None:
    args = [arg for k, v in SEED_S0.items() for arg in ("-X", f"{k}={v}")]
    result = run_cli("--client", "sarama", *args)
    assert result.returncode == 0, result.stderr
    first = result.stdout.splitlines()[0]
    assert first == f"{FIRST_LINE}: 123.85 s (sarama, 1 broker blackholed)"
    assert "(3 + 1) x 1 x 30s" in result.stdout
