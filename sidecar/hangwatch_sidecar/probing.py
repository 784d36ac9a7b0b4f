"""Passive-first probing: which brokers this round needs a probe for, and of what kind (pure).

Fed by the loop each round with the endpoints to watch, the socket view of the pod's own
connections, and what it remembers of each endpoint (last result, last fresh connect,
whether a probe connection is kept). For each endpoint it answers:

- `passive`: one of the pod's own connections to the broker received data within the
  passive window with nothing outstanding on any of them: the broker just answered the
  producer, no probe needed (a producer writing to three brokers costs them nothing);
- `kept`: one ApiVersions request on the probe connection kept from an earlier probe;
- `observed`: the pod's own connections to the broker are blackholed (unacknowledged
  data retransmitted, or connects unanswered past a second): the broker is `timeout`
  without waiting for a probe's timeout (faster than any connect timeout); every
  `OBSERVED_RECHECK`-th round in a row a fresh connection checks that new connections
  fail too;
- `fresh`: a new connection (DNS, TCP, TLS when configured, ApiVersions), which is then
  kept. Only when there is no kept connection, at the slow `fresh_connect_interval`
  (new connections must keep working, not only old ones), or on doubt: the last result
  was not `ok`, or a request on the pod's own connection to the broker is unanswered.

With `mode="fresh"` every endpoint gets a new connection every round (the behaviour
before passive-first probing, kept for comparison). SASL listeners close a connection
that sends a second request before authenticating, so with SASL nothing is kept: a
broker without passive evidence gets a fresh connection each round, as before.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from hangwatch_sidecar.sockets.types import Pattern, SocketObservation


class ProbeMode(StrEnum):
    """How one endpoint is checked this round."""

    PASSIVE = "passive"
    OBSERVED = "observed"
    KEPT = "kept"
    FRESH = "fresh"


OBSERVED_RECHECK = 5
"""While the pod's connections stay blackholed, every this many rounds a fresh connection
checks the broker itself (a producer's old connection can be broken alone)."""


@dataclass(frozen=True)
class EndpointMemory:
    """What the loop remembers of one endpoint between rounds."""

    last_ok: bool
    last_fresh_at: float | None
    kept: bool
    observed: int = 0
    """Rounds in a row the broker was judged from the pod's blackholed connections."""


@dataclass(frozen=True)
class PlannedProbe:
    endpoint: str
    mode: ProbeMode
    why: str


@dataclass(frozen=True)
class PassiveEvidence:
    """Per broker (named as the socket view names it): seconds since the pod's own
    connections last got an answer with nothing outstanding, and brokers in doubt."""

    answered: Mapping[str, float]
    doubt: Mapping[str, str]
    """Broker -> why its connections look wrong."""
    blackholed: Mapping[str, str] = field(default_factory=dict)
    """Broker -> what shows the pod's own connections to it blackholed."""


_DOUBTFUL = {
    Pattern.UNANSWERED: "a request unanswered on the pod's connection",
    Pattern.BLACKHOLED: "the pod's own connection is blackholed: unacknowledged data retransmitted",
    Pattern.CONNECT_UNANSWERED: "the pod's own connects to it go unanswered past a second",
}
_BLACKHOLED = (Pattern.BLACKHOLED, Pattern.CONNECT_UNANSWERED)


def passive_evidence(view: SocketObservation | None, window_seconds: float) -> PassiveEvidence:
    """Which brokers answered the pod's own connections within the window, and which are
    in doubt; a broker with a request outstanding longer than the window is neither."""
    if view is None or not view.available:
        return PassiveEvidence({}, {})
    doubt: dict[str, str] = {}
    blackholed: dict[str, str] = {}
    waiting: set[str] = set()
    answered: dict[str, float] = {}
    for c in view.connections:
        if c.pattern in _BLACKHOLED:
            blackholed.setdefault(c.broker, _DOUBTFUL[c.pattern])
        if c.pattern in _DOUBTFUL:
            doubt.setdefault(c.broker, _DOUBTFUL[c.pattern])
        elif c.request_outstanding and (c.waiting_seconds or 0.0) > window_seconds:
            waiting.add(c.broker)
        elif not c.request_outstanding and c.last_received_seconds is not None:
            seen = min(answered.get(c.broker, float("inf")), c.last_received_seconds)
            answered[c.broker] = seen
    fresh = {
        b: age
        for b, age in answered.items()
        if age <= window_seconds and b not in doubt and b not in waiting
    }
    return PassiveEvidence(fresh, doubt, blackholed)


def plan_probes(
    endpoints: Sequence[str],
    memory: Mapping[str, EndpointMemory],
    evidence: PassiveEvidence,
    *,
    now: float,
    mode: str = "passive-first",
    fresh_connect_interval_seconds: float = 300.0,
    keep_connections: bool = True,
) -> list[PlannedProbe]:
    """The probe of each endpoint this round, in the order given."""
    plans = []
    for endpoint in endpoints:
        plans.append(
            _plan(
                endpoint,
                memory.get(endpoint),
                evidence,
                now,
                mode,
                fresh_connect_interval_seconds,
                keep_connections,
            )
        )
    return plans


def _plan(
    endpoint: str,
    remembered: EndpointMemory | None,
    evidence: PassiveEvidence,
    now: float,
    mode: str,
    fresh_interval: float,
    keep: bool,
) -> PlannedProbe:
    if mode == "fresh":
        return PlannedProbe(endpoint, ProbeMode.FRESH, "probe mode fresh")
    if remembered is None:
        return PlannedProbe(endpoint, ProbeMode.FRESH, "first probe")
    if endpoint in evidence.blackholed and remembered.observed + 1 < OBSERVED_RECHECK:
        return PlannedProbe(endpoint, ProbeMode.OBSERVED, evidence.blackholed[endpoint])
    if not remembered.last_ok:
        return PlannedProbe(endpoint, ProbeMode.FRESH, "last probe failed")
    if endpoint in evidence.doubt:
        return PlannedProbe(endpoint, ProbeMode.FRESH, evidence.doubt[endpoint])
    if remembered.last_fresh_at is None or now - remembered.last_fresh_at >= fresh_interval:
        return PlannedProbe(endpoint, ProbeMode.FRESH, "fresh connect due")
    if endpoint in evidence.answered:
        age = evidence.answered[endpoint]
        return PlannedProbe(
            endpoint, ProbeMode.PASSIVE, f"answered the pod's own connection {age:.1f} s ago"
        )
    if keep and remembered.kept:
        return PlannedProbe(endpoint, ProbeMode.KEPT, "kept probe connection")
    return PlannedProbe(endpoint, ProbeMode.FRESH, "no kept connection")
