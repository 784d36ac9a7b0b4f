"""What a time-to-error model returns: the worst case, its terms, and what it assumes.

Each per-client model (`librdkafka`, `java`, `sarama`) is a module with the same
functions (`ClientModel`); `worst_case_of(model, config, brokers)` is the one place that
turns a configuration into an `Estimate` with any of them. `hangwatch config-check`
prints it and the sidecar compares it with a policy's time-to-error budget. The
findings shared by every client (a dead broker stalling metadata refreshes, retries or
an unbounded overall cap over the budget) are built here so each model words them the
same way.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from hangwatch.errors import UsageError

INT32_MAX = 2_147_483_647
"""Kafka clients' "unlimited" for retries and for millisecond timeouts."""


class ClientSettingsError(UsageError):
    """A producer setting is missing its value, malformed, or refused by the client."""


class Code:
    """Stable codes of the warnings, for scripts and alerts that match on them."""

    UNBOUNDED_WAIT = "unbounded-wait"
    RETRIES_EXCEED_BUDGET = "retries-exceed-budget"
    METADATA_REFRESH_DEAD_BROKER = "metadata-refresh-dead-broker"
    IDEMPOTENCE_UNBOUNDED_RETRIES = "idempotence-unbounded-retries"
    RECORD_ABOVE_PRODUCER_LIMIT = "record-above-producer-limit"
    RECORD_ABOVE_TOPIC_LIMIT = "record-above-topic-limit"


@dataclass(frozen=True)
class Term:
    """One addend of the worst case: a named wait, its length and where it comes from."""

    name: str
    seconds: float
    formula: str
    """The term in setting names, e.g. `(Metadata.Retry.Max + 1) x brokers x Net.DialTimeout`."""
    values: str
    """The same with this configuration's values, e.g. `(3 + 1) x 3 x 30s`."""
    keys: tuple[str, ...]
    """The configuration keys the term depends on."""


@dataclass(frozen=True)
class ConfigFinding:
    """A risky setting: a stable `code` and one sentence saying why and what to change."""

    code: str
    message: str


@dataclass(frozen=True)
class Estimate:
    """Worst-case time until a send reports an error when every broker is blackholed."""

    client: str
    brokers: int
    terms: tuple[Term, ...]
    assumptions: tuple[str, ...] = ()
    findings: tuple[ConfigFinding, ...] = ()
    notes: tuple[str, ...] = ()
    """Risks the configuration cannot show (application code, client bugs)."""

    @property
    def formula(self) -> str:
        """The worst case in setting names: the terms' formulas added up."""
        return " + ".join(t.formula for t in self.terms)

    @property
    def total_seconds(self) -> float:
        """Sum of the terms; `math.inf` when a setting disables a timeout."""
        return sum(t.seconds for t in self.terms)

    @property
    def unbounded(self) -> bool:
        """True when a setting disables an overall timeout: a send may never report."""
        return math.isinf(self.total_seconds)

    def exceeds(self, budget_seconds: float) -> bool:
        """True when the worst case (or an unbounded wait) is over the budget."""
        return self.total_seconds > budget_seconds


def seconds_text(seconds: float) -> str:
    """`123.85 s`, `0.1 s`, `unbounded` — for terms, formulas and messages."""
    if math.isinf(seconds):
        return "unbounded"
    if seconds >= 1e7:
        return f"{seconds:.3g} s"
    return f"{seconds:.3f}".rstrip("0").rstrip(".") + " s"


def dead_broker_refresh(
    brokers: int, stall_text: str, interval_seconds: float | None, interval_key: str, how: str
) -> tuple[ConfigFinding, ...]:
    """Seed S3: with several brokers, a blackholed one can stall each metadata refresh.

    `stall_text` says how long one stall lasts (a connect timeout and its key);
    `interval_seconds` is the periodic refresh interval (None when disabled); `how`
    says how this client picks the broker it asks.
    """
    if brokers < 2:
        return ()
    often = (
        f"every {interval_key} ({seconds_text(interval_seconds)})"
        if interval_seconds is not None
        else f"only on errors ({interval_key} disables the periodic refresh)"
    )
    message = (
        f"{brokers} brokers: a blackholed one (dead host, not a closed port) can stall a "
        f"metadata refresh for {stall_text}, {often}; {how} A closed port fails in about a "
        "second, a dead IP waits the whole connect timeout (seed S3)."
    )
    return (ConfigFinding(Code.METADATA_REFRESH_DEAD_BROKER, message),)


def retries_over_budget(
    retry_chain_seconds: float,
    chain_text: str,
    total_seconds: float,
    budget_seconds: float | None,
    cap_text: str,
) -> tuple[ConfigFinding, ...]:
    """Retries times per-attempt timeouts over the budget, when nothing caps them below it.

    Not raised when the overall cap is unbounded: `unbounded-wait` already says so.

    `chain_text` spells the product with its values; `cap_text` names what actually
    ends the send (an overall timeout, or the chain itself).
    """
    if budget_seconds is None or retry_chain_seconds <= budget_seconds:
        return ()
    if total_seconds <= budget_seconds or math.isinf(total_seconds):
        return ()  # capped below the budget, or already reported as an unbounded wait
    message = (
        f"{chain_text} = {seconds_text(retry_chain_seconds)}, over the "
        f"{seconds_text(budget_seconds)} budget; {cap_text}"
    )
    return (ConfigFinding(Code.RETRIES_EXCEED_BUDGET, message),)


def unlimited_idempotent_retries(
    idempotent: bool,
    retries: int,
    cap_key: str,
    cap_seconds: float,
    budget_seconds: float | None,
) -> tuple[ConfigFinding, ...]:
    """Idempotence with unlimited retries: only the overall cap ends a send — flag it when
    that cap is disabled or over the budget."""
    if not idempotent or retries < INT32_MAX:
        return ()
    over = math.isinf(cap_seconds) or (budget_seconds is not None and cap_seconds > budget_seconds)
    if not over:
        return ()
    cap = "disabled: a send never fails" if math.isinf(cap_seconds) else seconds_text(cap_seconds)
    message = (
        f"idempotence is on with unlimited retries ({INT32_MAX}): only {cap_key} ends a send, "
        f"and it is {cap}; set {cap_key} below the budget"
    )
    return (ConfigFinding(Code.IDEMPOTENCE_UNBOUNDED_RETRIES, message),)


class ClientModel(Protocol):
    """What each per-client model module provides (settings objects are the model's own)."""

    CLIENT: str
    BOOTSTRAP_KEY: str

    def canonical(self, config: Mapping[str, str]) -> dict[str, str]: ...

    def parse_settings(self, config: Mapping[str, str]) -> Any: ...

    def terms(self, s: Any, brokers: int) -> tuple[Term, ...]: ...

    def assumptions(self, s: Any, brokers: int) -> tuple[str, ...]: ...

    def findings(
        self, s: Any, parts: tuple[Term, ...], brokers: int, budget_seconds: float | None
    ) -> tuple[ConfigFinding, ...]: ...

    def notes(self, s: Any) -> tuple[str, ...]: ...

    def acks(self, config: Mapping[str, str]) -> int: ...


def worst_case_of(
    model: ClientModel,
    config: Mapping[str, str],
    brokers: int,
    budget_seconds: float | None = None,
) -> Estimate:
    """`model`'s worst-case seconds until a send reports an error with `brokers` blackholed."""
    s = model.parse_settings(config)
    parts = model.terms(s, brokers)
    return Estimate(
        client=model.CLIENT,
        brokers=brokers,
        terms=parts,
        assumptions=model.assumptions(s, brokers),
        findings=model.findings(s, parts, brokers, budget_seconds),
        notes=model.notes(s),
    )
