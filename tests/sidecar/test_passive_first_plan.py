"""Passive-first probing decides each broker's probe from evidence (pure `probing`).

Covered: a broker never probed, or whose last probe failed, gets a fresh connection; one
whose pod connections answered within the window with nothing outstanding gets no probe
(`passive`), one with a kept connection an ApiVersions on it (`kept`); the pod's own
connections blackholed (data or connects) judge the broker `observed` without a probe,
with a fresh connection every OBSERVED_RECHECK-th round; an unanswered request on the
pod's connection forces a fresh connection; a
request outstanding beyond the window removes the passive evidence without doubt; the
fresh-connect cadence applies even to brokers with passive evidence; `mode="fresh"`
always connects afresh; without kept connections (SASL) a broker without passive
evidence is connected afresh; an unavailable socket view gives no passive evidence.
"""

from __future__ import annotations

from dataclasses import replace

from hangwatch_sidecar.probing import (
    OBSERVED_RECHECK,
    EndpointMemory,
    PassiveEvidence,
    ProbeMode,
    passive_evidence,
    plan_probes,
)
from hangwatch_sidecar.sockets.types import ConnectionEvidence, Pattern, SocketObservation
from tests.sidecar.builders import connection, socket_view

A, B = "10.0.0.1:9092", "10.0.0.2:9092"
GOOD = EndpointMemory(last_ok=True, last_fresh_at=100.0, kept=True)
ANSWERED = connection(pattern=Pattern.ANSWERED, quiet_seconds=0.2, last_received_seconds=0.2)


def modes(
    evidence: PassiveEvidence, memory: dict[str, EndpointMemory], **kw: object
) -> list[ProbeMode]:
    plans = plan_probes([A, B], memory, evidence, now=110.0, **kw)  # type: ignore[arg-type]
    return [p.mode for p in plans]


def test_first_and_failed_probes_are_fresh() -> None:
    evidence = PassiveEvidence({A: 0.1, B: 0.1}, {})
    assert modes(evidence, {}) == [ProbeMode.FRESH, ProbeMode.FRESH]
    failed = replace(GOOD, last_ok=False)
    assert modes(evidence, {A: failed, B: GOOD}) == [ProbeMode.FRESH, ProbeMode.PASSIVE]


def test_passive_kept_and_fresh_in_steady_state() -> None:
    evidence = PassiveEvidence({A: 0.3}, {})
    assert modes(evidence, {A: GOOD, B: GOOD}) == [ProbeMode.PASSIVE, ProbeMode.KEPT]
    assert modes(evidence, {A: GOOD, B: replace(GOOD, kept=False)}) == [
        ProbeMode.PASSIVE,
        ProbeMode.FRESH,
    ]


def test_an_unanswered_request_forces_a_fresh_connection() -> None:
    evidence = PassiveEvidence({}, {A: "a request unanswered on the pod's connection"})
    (plan, _) = plan_probes([A, B], {A: GOOD, B: GOOD}, evidence, now=110.0)
    assert plan.mode is ProbeMode.FRESH and "unanswered" in plan.why


def test_blackholed_connections_judge_the_broker_and_a_fresh_probe_rechecks() -> None:
    why = "the pod's own connection is blackholed"
    evidence = PassiveEvidence({}, {A: why}, {A: why})
    for observed in range(OBSERVED_RECHECK - 1):
        memory = {A: replace(GOOD, last_ok=observed == 0, observed=observed), B: GOOD}
        (plan, _) = plan_probes([A, B], memory, evidence, now=110.0)
        assert plan.mode is ProbeMode.OBSERVED and plan.why == why
    memory = {A: replace(GOOD, last_ok=False, observed=OBSERVED_RECHECK - 1), B: GOOD}
    (plan, _) = plan_probes([A, B], memory, evidence, now=110.0)
    assert plan.mode is ProbeMode.FRESH
    assert plan_probes([A], {}, evidence, now=110.0)[0].mode is ProbeMode.FRESH


def test_the_fresh_connect_cadence_applies_to_passive_brokers_too() -> None:
    evidence = PassiveEvidence({A: 0.1}, {})
    due = modes(evidence, {A: GOOD, B: GOOD}, fresh_connect_interval_seconds=5.0)
    assert due == [ProbeMode.FRESH, ProbeMode.FRESH]


def test_fresh_mode_and_sasl() -> None:
    evidence = PassiveEvidence({A: 0.1}, {})
    memory = {A: GOOD, B: GOOD}
    assert modes(evidence, memory, mode="fresh") == [ProbeMode.FRESH, ProbeMode.FRESH]
    assert modes(evidence, memory, keep_connections=False) == [ProbeMode.PASSIVE, ProbeMode.FRESH]


def _view(*conns: ConnectionEvidence, error: str | None = None) -> SocketObservation:
    return socket_view(*conns, error=error)


def test_passive_evidence_from_the_socket_view() -> None:
    assert passive_evidence(_view(ANSWERED), 1.0) == PassiveEvidence({A: 0.2}, {}, {})
    old = replace(ANSWERED, pattern=Pattern.IDLE, last_received_seconds=5.0)
    assert passive_evidence(_view(old), 1.0) == PassiveEvidence({}, {})
    waiting = replace(
        ANSWERED,
        connection="x",
        pattern=Pattern.AWAITING,
        waiting_seconds=2.0,
        last_received_seconds=2.0,
    )
    assert passive_evidence(_view(ANSWERED, waiting), 1.0) == PassiveEvidence({}, {})
    short_wait = replace(waiting, waiting_seconds=0.05)
    assert passive_evidence(_view(ANSWERED, short_wait), 1.0).answered == {A: 0.2}
    for pattern in (Pattern.UNANSWERED, Pattern.BLACKHOLED, Pattern.CONNECT_UNANSWERED):
        doubtful = replace(ANSWERED, connection="y", pattern=pattern)
        result = passive_evidence(_view(ANSWERED, doubtful), 1.0)
        assert result.answered == {} and A in result.doubt
        assert (A in result.blackholed) is (pattern is not Pattern.UNANSWERED)
    assert passive_evidence(_view(ANSWERED, error="no netlink"), 1.0) == PassiveEvidence({}, {})
    assert passive_evidence(None, 1.0) == PassiveEvidence({}, {})
