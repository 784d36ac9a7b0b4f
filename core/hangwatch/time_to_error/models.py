"""Worst-case time-to-error of a producer configuration, for any supported client.

Seeds S0 and S3 were configurations whose worst case nobody computed. Each client has
a pure model module (`librdkafka`, `java`, `sarama`; see `estimate.ClientModel`); this
module picks the model by client name, works out how many brokers to assume and says
where that number came from. `hangwatch config-check` is the command-line front end.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from hangwatch.time_to_error import java, librdkafka, sarama
from hangwatch.time_to_error.client_config import address_count
from hangwatch.time_to_error.estimate import (
    ClientModel,
    ClientSettingsError,
    Estimate,
    worst_case_of,
)

MODELS: dict[str, ClientModel] = {
    librdkafka.CLIENT: librdkafka,
    java.CLIENT: java,
    sarama.CLIENT: sarama,
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
            raise ClientSettingsError(f"--brokers must be >= 1, got {brokers}")
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
        raise ClientSettingsError(f"unknown client {client!r} (choose from {', '.join(MODELS)})")
    count, why = broker_count(client, config, brokers)
    estimate = worst_case_of(MODELS[client], config, count, budget_seconds)
    return replace(estimate, assumptions=(why, *estimate.assumptions))
