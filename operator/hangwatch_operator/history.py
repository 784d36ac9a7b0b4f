"""What the operator remembers per policy: decisions made, what was reported, cordons.

Fed after every round by `remediation` (`remember`), at start-up from the policy's
own `status.recentActions` (`seed_history`, so a restarted or newly elected operator
keeps cooldowns and rate limits), and from the node index (`with_cordons`). Read by
`decisions` (cooldown, rate limit, in-flight actions, election grace, auto-uncordon)
and by `newsworthy`, which keeps an unchanged decision from becoming an Event every
poll. `CordonLedger` is the one thing shared across policies: the cordons carried out
that the node index may not show yet. Pure: no I/O, no clock.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from hangwatch.contracts import Verdict
from hangwatch_operator.operations import Operation, Outcome, Suppression
from hangwatch_operator.watched import CordonedNode, parse_time

RECORDS_KEPT_SECONDS = 3600
"""Records older than the rate-limit window are dropped (cooldowns are shorter or equal)."""
RECORDS_KEPT_MAX = 2000
"""Bound on remembered records per policy, whatever the churn."""
PENDING_CORDON_SECONDS = 120.0
"""How long a cordon carried out counts whether or not the node index shows it. The
index follows a watch and shows a new cordon within seconds; one it never shows (the
node was left alone, being unschedulable already) stops counting after two minutes."""


@dataclass(frozen=True)
class ActionRecord:
    """One reported decision, as remembered (and as shown in `status.recentActions`)."""

    time: float
    operation: Operation
    verdict: Verdict
    outcome: Outcome
    pod: str | None = None
    """`namespace/name` of the pod acted on; None for node operations."""
    node: str | None = None
    application_id: str | None = None
    """What the hourly action limit groups by (`WatchedPod.limit_group`): the Spark
    application id, or a `producer` pod's controlling owner as `<Kind>/<name>`."""
    suppression: Suppression | None = None
    message: str = ""
    topic: str | None = None
    """The topic of an alert said once per topic (`decisions.Decision.topic`)."""

    @property
    def target(self) -> str:
        if self.topic is not None:
            return f"topic/{self.topic}"
        return self.pod if self.pod is not None else f"node/{self.node}"

    @property
    def attempt(self) -> tuple[str, Operation, int]:
        """The decision this record ended: its target, operation and second. A restart
        entered in the limits ledger as `acted` before it was carried out and then
        remembered as `failed` is one attempt (the ledger keeps whole seconds)."""
        return self.target, self.operation, math.floor(self.time)

    @property
    def starts_cooldown(self) -> bool:
        """Something was done (or tried) to the target. A dry run starts no cooldown: had
        it acted, the pod would be gone, so its repeats say "would restart" again. Nor
        does an alert: it does nothing to the pod (an alert reported while the restart
        waited for an election to end must not then hold the restart back)."""
        return self.operation is not Operation.ALERT and self.outcome in {
            Outcome.ACTED,
            Outcome.FAILED,
        }


@dataclass(frozen=True)
class Notice:
    """The last time an unchanged decision (same signature) was reported."""

    signature: tuple[str, ...]
    time: float


@dataclass(frozen=True)
class History:
    """Everything `decide` needs from the past of one policy."""

    records: tuple[ActionRecord, ...] = ()
    """Newest first."""
    notified: Mapping[str, Notice] = field(default_factory=dict)
    last_election_ts: float | None = None
    node_fault_ts: Mapping[str, float] = field(default_factory=dict)
    """Node -> the last time it was found at fault (or, after a restart, first seen cordoned)."""
    cordoned: Mapping[str, float | None] = field(default_factory=dict)
    """Nodes this policy cordoned (from their annotations) -> since when."""
    cordoned_elsewhere: frozenset[str] = frozenset()
    """Nodes another policy cordoned: never cordoned twice, never uncordoned from here."""
    unhealthy_seen: Mapping[str, float] = field(default_factory=dict)
    """Pod key -> the last round its sidecar answered with an unhealthy verdict, kept
    while the sidecar does not answer (the storm gate's memory: `decisions.recalled`)."""

    def recent(self, now: float, seconds: float) -> Iterable[ActionRecord]:
        return (r for r in self.records if now - r.time < seconds)


class Reportable(Protocol):
    """Something that may become an Event: decisions and sidecar silences."""

    @property
    def key(self) -> str: ...

    @property
    def signature(self) -> tuple[str, ...]: ...


_R = TypeVar("_R", bound=Reportable)


def newsworthy(
    items: Sequence[_R], history: History, now: float, repeat_seconds: float
) -> list[_R]:
    """The items to report now: new or changed ones, and unchanged ones due for a repeat."""
    out = []
    for item in items:
        seen = history.notified.get(item.key)
        if seen is None or seen.signature != item.signature or now - seen.time >= repeat_seconds:
            out.append(item)
    return out


def remember(
    history: History,
    *,
    current: Sequence[Reportable],
    reported: Sequence[Reportable],
    records: Sequence[ActionRecord],
    election_seen: bool,
    faulty_nodes: Iterable[str],
    now: float,
    partial: bool = False,
    unhealthy: Iterable[str] = (),
    unanswered: Iterable[str] = (),
) -> History:
    """History after a round: new records first, notices only for what is still current.
    `partial`: `current` is a part of a round decided before its end (`rounds.early_slice`):
    the other notices, the last election, the node faults and the unhealthy pods stay as
    they were. `unhealthy`, `unanswered`: keys of the watched pods whose sidecar answered
    an unhealthy verdict, and of those whose sidecar did not answer; a pod in neither
    (healthy, or gone) is forgotten in `unhealthy_seen`."""
    reported_keys = {item.key for item in reported}
    notified = {
        item.key: Notice(item.signature, now)
        if item.key in reported_keys or item.key not in history.notified
        else history.notified[item.key]
        for item in current
    }
    kept = [r for r in (*records, *history.records) if now - r.time < RECORDS_KEPT_SECONDS]
    if partial:
        return dataclasses.replace(
            history,
            records=tuple(kept[:RECORDS_KEPT_MAX]),
            notified={**history.notified, **notified},
        )
    faults = {**history.node_fault_ts, **dict.fromkeys(faulty_nodes, now)}
    return dataclasses.replace(
        history,
        records=tuple(kept[:RECORDS_KEPT_MAX]),
        notified=notified,
        last_election_ts=now if election_seen else history.last_election_ts,
        node_fault_ts={n: t for n, t in faults.items() if n in history.cordoned or t == now},
        unhealthy_seen={
            **{k: history.unhealthy_seen[k] for k in unanswered if k in history.unhealthy_seen},
            **dict.fromkeys(unhealthy, now),
        },
    )


def with_cordons(
    history: History, ours: Mapping[str, float | None], others: Iterable[str], now: float
) -> History:
    """History updated with the cluster's current hangwatch cordons.

    A node seen cordoned for the first time (e.g. after an operator restart) counts as
    at fault now, so auto-uncordon waits a full `healthyForSeconds` from here.
    """
    faults = dict(history.node_fault_ts)
    for node in ours:
        faults.setdefault(node, now)
    return dataclasses.replace(
        history, cordoned=dict(ours), cordoned_elsewhere=frozenset(others), node_fault_ts=faults
    )


@dataclass
class CordonLedger:
    """Cordons planned or carried out in this process, for the node index to catch up.

    Every policy's round runs in one event loop, and a round reserves the cordons it
    will carry out before it awaits anything (`reserve`), so a second policy deciding
    in the same instant counts them against the operator's cap. A reservation counts
    until the cordon fails or is undone (`release`) or `PENDING_CORDON_SECONDS` pass,
    even once the index shows the node: a round may hold an index read from before it
    polled its sidecars.
    """

    pending: dict[str, CordonedNode] = field(default_factory=dict)

    def known(self, indexed: Sequence[CordonedNode], now: float) -> list[CordonedNode]:
        """Every hangwatch cordon: the index's, then the reservations it does not show."""
        self.pending = {
            name: cordon
            for name, cordon in self.pending.items()
            if now - (cordon.since or now) < PENDING_CORDON_SECONDS
        }
        shown = {c.name for c in indexed}
        return [*indexed, *(c for n, c in self.pending.items() if n not in shown)]

    def reserve(self, node: str, policy_key: str, now: float) -> None:
        self.pending[node] = CordonedNode(node, policy_key, now)

    def release(self, node: str) -> None:
        self.pending.pop(node, None)


def seed_history(status: Mapping[str, Any] | None, namespace: str) -> History:
    """History rebuilt from a policy's `status.recentActions` (newest first)."""
    records = []
    for raw in (status or {}).get("recentActions") or ():
        record = record_from_entry(raw, namespace)
        if record is not None:
            records.append(record)
    return History(records=tuple(records))


def record_from_entry(raw: Any, namespace: str) -> ActionRecord | None:
    if not isinstance(raw, Mapping):
        return None
    when = parse_time(raw.get("time"))
    try:
        operation = Operation(str(raw.get("action")))
        verdict = Verdict(str(raw.get("verdict")))
        outcome = Outcome(str(raw.get("decision") or _legacy_outcome(raw)))
        suppression = Suppression(raw["suppressedBy"]) if raw.get("suppressedBy") else None
    except ValueError:
        return None
    if when is None:
        return None
    return ActionRecord(
        time=when,
        operation=operation,
        verdict=verdict,
        outcome=outcome,
        pod=f"{namespace}/{raw['pod']}" if raw.get("pod") else None,
        node=raw.get("node") or None,
        application_id=raw.get("applicationId") or None,
        suppression=suppression,
        message=str(raw.get("message") or ""),
        topic=str(raw["topic"]) if isinstance(raw.get("topic"), str) else None,
    )


def _legacy_outcome(raw: Mapping[str, Any]) -> str:
    """A record without `decision`: map the coarse `outcome` (done, skipped, failed)."""
    if raw.get("outcome") == "done":
        return Outcome.ACTED
    if raw.get("outcome") == "failed":
        return Outcome.FAILED
    return Outcome.DRY_RUN if raw.get("dryRun") else Outcome.SUPPRESSED
