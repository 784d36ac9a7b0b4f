"""Worst-case time-to-error of a producer configuration, for any supported client.

Seeds S0 and S3 were configurations whose worst case nobody computed. Each client has
a pure model (`librdkafka_timeouts`, `java_timeouts`, `sarama_timeouts`) exposing
`worst_case(config, brokers, budget_seconds=None) -> Estimate`; this module picks the
model, works out how many brokers to assume, and says where that number came from.
`hangwatch config-check` (`config_check`) is the command-line front end.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Protocol

from hangwatch_pipeline import java_timeouts, librdkafka_timeouts, sarama_timeouts
from hangwatch_pipeline.client_config import address_count
from hangwatch_pipeline.estimates import Estimate, SettingsError


class ClientModel(Protocol):
    """What each per-client model module provides."""

    CLIENT: str
    BOOTSTRAP_KEY: str

    def canonical(self, config: Mapping[str, str]) -> dict[str, str]: ...

    def worst_case(
        self, config: Mapping[str, str], brokers: int, budget_seconds: float | None = None
    ) -> Estimate: ...


MODELS: dict[str, ClientModel] = {
    librdkafka_timeouts.CLIENT: librdkafka_timeouts,
    java_timeouts.CLIENT: java_timeouts,
    sarama_timeouts.CLIENT: sarama_timeouts,
}
"""Client name (as given to `--client`) -> its model."""


def broker_count(client: str, config: Mapping[str, str], brokers: int | None) -> tuple[int, str]:
    """How many brokers to assume blackholed, and a sentence saying why.

    An explicit count wins; otherwise the distinct entries of the bootstrap list;
    otherwise one broker.
    """
    model = MODELS[client]
    key = model.BOOTSTRAP_KEY
    listed = address_count(model.canonical(config).get(key))
    if brokers is not None:
        if brokers < 1:
            raise SettingsError(f"--brokers must be >= 1, got {brokers}")
        seen = f" ({key} lists {listed})" if listed else ""
        return brokers, f"{brokers} broker(s) blackholed, from --brokers{seen}"
    if listed:
        return listed, (
            f"{listed} broker(s) blackholed, one per distinct {key} entry "
            "(a DNS name that resolves to several brokers counts once: pass --brokers)"
        )
    return 1, f"1 broker blackholed: no --brokers and no {key} given"


def worst_case(
    client: str,
    config: Mapping[str, str],
    brokers: int | None = None,
    budget_seconds: float | None = None,
) -> Estimate:
    """The estimate of `client`'s model, with the broker-count assumption first."""
    if client not in MODELS:
        raise SettingsError(f"unknown client {client!r} (choose from {', '.join(MODELS)})")
    count, why = broker_count(client, config, brokers)
    estimate = MODELS[client].worst_case(config, count, budget_seconds)
    return replace(estimate, assumptions=(why, *estimate.assumptions))
