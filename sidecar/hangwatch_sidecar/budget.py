"""The time-to-error budget: how long each producer's own settings can keep a send silent.

Seed S0 was a configuration nobody had worked out: 3 s of configured timeout became two
minutes of silence. Every round the loop hands this module each producer's ACTUAL
librdkafka configuration (the `config` of its telemetry, secrets already redacted by
the wrapper) and the budget (`--time-to-error-budget-seconds`, the policy's
`timeToErrorBudgetSeconds`); it computes the worst case with `hangwatch.time_to_error`'s
librdkafka model (the wrapper's client) and reports the producers over budget in
`/status` (`time_to_error`) and in metrics. A configuration warning, not a verdict: it
never changes what the pod is judged. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping

from hangwatch.errors import UsageError
from hangwatch.time_to_error import librdkafka
from hangwatch.time_to_error.models import worst_case
from hangwatch.wire.status import ProducerTimeToError, TimeToError

CLIENT = librdkafka.CLIENT
"""Producers writing telemetry are the wrapper's: confluent-kafka, i.e. librdkafka."""

ConfigValue = str | int | float | bool | None


def _setting(value: ConfigValue) -> str:
    """A telemetry config value as the client's own text (`true`, `3000`)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def check_producer(
    config: Mapping[str, ConfigValue] | None, budget_seconds: float
) -> ProducerTimeToError:
    """The worst case of one producer's configuration against the budget."""
    if config is None:
        return ProducerTimeToError(
            client=CLIENT, problem="no configuration in its telemetry (detail minimal)"
        )
    settings = {key: _setting(value) for key, value in config.items() if value is not None}
    try:
        estimate = worst_case(CLIENT, settings, None, budget_seconds)
    except (UsageError, ValueError) as exc:
        return ProducerTimeToError(client=CLIENT, problem=str(exc)[:240])
    return ProducerTimeToError(
        client=CLIENT,
        worst_case_seconds=None if estimate.unbounded else round(estimate.total_seconds, 3),
        unbounded=estimate.unbounded,
        over_budget=estimate.exceeds(budget_seconds),
        formula=estimate.formula,
    )


def time_to_error(
    configs: Mapping[str, Mapping[str, ConfigValue] | None], budget_seconds: float
) -> TimeToError:
    """Every producer's worst case, and which are over the budget."""
    producers = {key: check_producer(configs[key], budget_seconds) for key in sorted(configs)}
    return TimeToError(
        budget_seconds=budget_seconds,
        over_budget=[key for key, p in producers.items() if p.over_budget],
        producers=producers,
    )
