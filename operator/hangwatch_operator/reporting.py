"""Decisions and findings as Kubernetes sees them: Events, action records, policy status.

Fed by `remediation` after each round with the decisions worth reporting
(`history.newsworthy`), the sidecars that did not answer and the correlated
findings. Builds core/v1 Event bodies (named `<object>.<suffix>` like client-go's
recorder, reasons `Hangwatch*`), the `status.recentActions` entries and the whole
`status` of a ProducerHealthPolicy (conditions keep their lastTransitionTime while
unchanged). Pure: the caller passes `now` and writes the results.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from hangwatch.pod_security import LOST
from hangwatch_operator.correlation import (
    SIDECAR_UNREACHABLE,
    Findings,
    PodFinding,
    TopicFinding,
)
from hangwatch_operator.decisions import Decision, Gates
from hangwatch_operator.history import ActionRecord
from hangwatch_operator.operations import Operation, Outcome, Suppression
from hangwatch_operator.policies import GROUP, KIND, VERSION, Policy
from hangwatch_operator.watched import WatchedPod, format_time

RECENT_ACTIONS_MAX = 20
"""`status.recentActions` holds at most this many entries (the CRD's maxItems)."""
PARTITIONS_SHOWN = 100
"""Partitions a `status.unwritableTopics` entry lists at most (the CRD's maxItems)."""
EVENT_MESSAGE_MAX = 1024
"""The API server truncates longer Event messages anyway; cut them ourselves, legibly."""
REPORTING_COMPONENT = "hangwatch-operator"
NODE_EVENT_NAMESPACE = "default"
"""Where Events about cluster-scoped Nodes go, as kubelet and kubectl put them."""
_ACTED_REASON = {
    Operation.RESTART: "HangwatchRestart",
    Operation.DECOMMISSION: "HangwatchDecommission",
    Operation.CORDON_NODE: "HangwatchCordonNode",
    Operation.UNCORDON_NODE: "HangwatchUncordonNode",
    Operation.ALERT: "HangwatchAlert",
}
_GATE_REASON = {
    Suppression.CLUSTER_UNREACHABLE: "ClusterUnreachable",
    Suppression.LEADER_ELECTION: "LeaderElection",
    Suppression.STORM: "Storm",
}


@dataclass(frozen=True)
class Fleet:
    """What the other replicas judge of a policy (sharding), for the status the holder
    of shard 0 writes: their published counts and the operations they entered."""

    replicas: int = 0
    watched: int = 0
    unhealthy: int = 0
    counts: Mapping[str, int] = field(default_factory=dict)
    """Pods per verdict (and `sidecar_unreachable`), summed over the other replicas."""
    records: Sequence[ActionRecord] = ()
    """Operations they entered in the limits ledger, newest first."""


@dataclass(frozen=True)
class SidecarSilence:
    """A watched pod whose sidecar did not answer: reported, never acted on."""

    finding: PodFinding

    @property
    def key(self) -> str:
        return f"{self.finding.pod.key}#sidecar"

    @property
    def signature(self) -> tuple[str, ...]:
        return ("sidecar_unreachable",)


def event_reason(decision: Decision) -> tuple[str, str]:
    """(type, reason) of the Event for a decision."""
    if decision.outcome is Outcome.SUPPRESSED:
        return "Warning", "HangwatchSuppressed"
    if decision.outcome is Outcome.DRY_RUN:
        return "Normal", "HangwatchDryRun"
    if decision.outcome is Outcome.FAILED:
        return "Warning", "HangwatchActionFailed"
    kind = "Normal" if decision.operation is Operation.UNCORDON_NODE else "Warning"
    return kind, _ACTED_REASON[decision.operation]


def decision_message(decision: Decision, policy_key: str) -> str:
    """One paragraph naming the verdict, what happened (or the limit) and the reasons."""
    what = f"{decision.verdict}: {decision.operation}"
    if decision.outcome is Outcome.SUPPRESSED:
        what += f" suppressed by {decision.suppression}: {decision.limit}"
    elif decision.outcome is Outcome.DRY_RUN:
        what += f" not done, dry run ({decision.limit})"
    elif decision.outcome is Outcome.FAILED:
        what += f" failed: {decision.note}"
    elif decision.note:
        what += f" done: {decision.note}"
    reasons = "; ".join(decision.reasons) or "none given"
    return f"{what}. Reasons: {reasons}. Policy {policy_key}."


def event_body(
    involved: Mapping[str, str], *, kind: str, reason: str, message: str, now: float, suffix: str
) -> dict[str, Any]:
    """A core/v1 Event about `involved` (apiVersion, kind, name, namespace, uid)."""
    namespace = involved.get("namespace") or NODE_EVENT_NAMESPACE
    if len(message) > EVENT_MESSAGE_MAX:
        message = message[: EVENT_MESSAGE_MAX - 3] + "..."
    stamp = format_time(now)
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{involved['name']}.{suffix}", "namespace": namespace},
        "involvedObject": {k: v for k, v in involved.items() if v},
        "type": kind,
        "reason": reason,
        "message": message,
        "count": 1,
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "source": {"component": REPORTING_COMPONENT},
        "reportingComponent": REPORTING_COMPONENT,
    }


LEFT_OUT_REASON = "HangwatchFeatureLeftOut"
"""Event reason: the webhook injected a pod without a feature its namespace forbids."""


def policy_reference(policy: Policy) -> dict[str, str]:
    """An Event's involvedObject for a ProducerHealthPolicy."""
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": KIND,
        "name": policy.name,
        "namespace": policy.namespace,
        "uid": policy.uid,
    }


def left_out_message(warnings: Sequence[str], pod: str, since_last: int) -> str:
    """The Event's message: the admission warnings, the pod, how many pods since the last."""
    others = f" ({since_last} pods since the last such Event)" if since_last > 1 else ""
    return f"{' '.join(warnings)}. Pod {pod}{others}."


def pod_reference(pod: WatchedPod) -> dict[str, str]:
    """An Event's involvedObject for a pod."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "name": pod.name,
        "namespace": pod.namespace,
        "uid": pod.uid,
    }


def involved_object(decision: Decision, policy: Policy) -> dict[str, str]:
    """The pod a decision is about, or its node; for a topic (the cluster refuses writes
    to it, whichever pods write it), the policy."""
    if decision.topic is not None:
        return policy_reference(policy)
    if decision.pod is not None:
        return pod_reference(decision.pod)
    return {"apiVersion": "v1", "kind": "Node", "name": decision.node or ""}


def silence_message(silence: SidecarSilence, policy_key: str) -> str:
    return (
        f"sidecar_unreachable: the hangwatch sidecar did not answer /status "
        f"({silence.finding.error}); no verdict, so no action. Policy {policy_key}."
    )


def action_record(decision: Decision, message: str, now: float) -> ActionRecord:
    pod = decision.pod
    return ActionRecord(
        time=now,
        operation=decision.operation,
        verdict=decision.verdict,
        outcome=decision.outcome,
        pod=pod.key if pod is not None else None,
        node=decision.node,
        application_id=pod.limit_group if pod is not None else None,
        suppression=decision.suppression,
        message=message,
        topic=decision.topic,
    )


def record_entry(record: ActionRecord) -> dict[str, Any]:
    """A `status.recentActions` entry."""
    target = record.pod.split("/", 1)[-1] if record.pod else record.node or ""
    if record.topic is not None:
        target = f"topic {record.topic}"
    summary = f"{record.operation} {target} ({record.verdict})"
    if record.outcome is Outcome.SUPPRESSED:
        summary += f" suppressed: {record.suppression}"
    elif record.outcome is Outcome.DRY_RUN:
        summary += " [dry run]"
    elif record.outcome is Outcome.FAILED:
        summary += " failed"
    coarse = {Outcome.ACTED: "done", Outcome.FAILED: "failed"}.get(record.outcome, "skipped")
    entry: dict[str, Any] = {
        "time": format_time(record.time),
        "action": str(record.operation),
        "verdict": str(record.verdict),
        "pod": record.pod.split("/", 1)[-1] if record.pod else None,
        "node": record.node,
        "topic": record.topic,
        "applicationId": record.application_id,
        "dryRun": record.outcome is Outcome.DRY_RUN,
        "outcome": coarse,
        "decision": str(record.outcome),
        "suppressedBy": str(record.suppression) if record.suppression else None,
        "summary": summary[:256],
        "message": record.message[:4096],
    }
    return {k: v for k, v in entry.items() if v is not None}


def build_status(
    *,
    previous: Mapping[str, Any] | None,
    findings: Findings,
    gates: Gates,
    policy: Policy,
    records: Sequence[ActionRecord],
    generation: int | None,
    now: float,
    ignored: int = 0,
    fleet: Fleet | None = None,
) -> dict[str, Any]:
    """The policy's whole status after a round; `records` are this round's, newest first;
    `ignored` counts the labelled pods the policy does not watch (not injected for it);
    `fleet`: the other replicas' share (sharding), added to the counts, the Ready and
    SidecarsReachable conditions and, for operations not shown yet, `recentActions`."""
    previous = previous or {}
    fleet = fleet or Fleet()
    earlier = previous.get("recentActions") or []
    shown = {_entry_key(e) for e in earlier if isinstance(e, Mapping)}
    oldest = min((str(e.get("time", "")) for e in earlier if isinstance(e, Mapping)), default="")
    full = len(earlier) >= RECENT_ACTIONS_MAX
    theirs = [
        r
        for r in fleet.records
        if _entry_key(entry := record_entry(r)) not in shown
        and not (full and entry["time"] < oldest)  # shown once, and dropped since
    ]
    records = sorted([*records, *theirs], key=lambda r: -r.time)
    entries = [record_entry(r) for r in records]
    recent = [*entries, *earlier]
    if theirs:
        recent.sort(
            key=lambda e: str(e.get("time", "")) if isinstance(e, Mapping) else "", reverse=True
        )
    recent = recent[:RECENT_ACTIONS_MAX]
    acted = [
        e for e, r in zip(entries, records, strict=True) if r.outcome is not Outcome.SUPPRESSED
    ]
    counts = findings.counts()
    for verdict in counts:
        counts[verdict] += fleet.counts.get(verdict, 0)
    status: dict[str, Any] = {
        "watched": len(findings.watched) + fleet.watched,
        "unhealthy": sum(1 for f in findings.watched if f.unhealthy) + fleet.unhealthy,
        "verdictCounts": counts,
        "conditions": merge_conditions(
            previous.get("conditions"),
            _conditions(findings, gates, policy, ignored, fleet),
            now,
            generation,
        ),
        "recentActions": recent,
        "notJudged": [
            {"feature": str(feature), "watchedPods": pods, "evidence": LOST[feature]}
            for feature, pods in findings.not_judged().items()
        ],
        "unwritableTopics": [
            unwritable_entry(found, now) for _, found in sorted(findings.unwritable.items())
        ],
    }
    if generation is not None:
        status["observedGeneration"] = generation
    last = acted[0] if acted else previous.get("lastAction")
    if last:
        status["lastAction"] = last
    return status


def unwritable_entry(found: TopicFinding, now: float) -> dict[str, Any]:
    """A `status.unwritableTopics` entry: one topic the cluster refuses writes to, its
    partitions, how many watched pods write it and since when, and why."""
    entry: dict[str, Any] = {
        "topic": found.topic,
        "partitions": list(found.partitions[: RECENT_ACTIONS_MAX * 50]),
        "watchedPods": len(found.pods),
        "since": format_time(found.since if found.since is not None else now),
        "reason": found.reason[:EVENT_MESSAGE_MAX],
    }
    return entry


def invalid_status(
    previous: Mapping[str, Any] | None, error: str, generation: int | None, now: float
) -> dict[str, Any]:
    """Status of a policy the operator cannot use: Ready=False, reason InvalidSpec."""
    ready = _condition("Ready", False, "InvalidSpec", error)
    conditions = merge_conditions((previous or {}).get("conditions"), [ready], now, generation)
    status: dict[str, Any] = {"conditions": conditions}
    if generation is not None:
        status["observedGeneration"] = generation
    return status


def merge_conditions(
    previous: Any, current: Sequence[dict[str, Any]], now: float, generation: int | None
) -> list[dict[str, Any]]:
    """`current` conditions, keeping lastTransitionTime where the status did not change."""
    before = {c.get("type"): c for c in previous or () if isinstance(c, Mapping)}
    merged = []
    for condition in current:
        old = before.get(condition["type"])
        changed = old is None or old.get("status") != condition["status"]
        stamp = format_time(now) if changed or old is None else old.get("lastTransitionTime")
        entry = {**condition, "lastTransitionTime": stamp}
        if generation is not None:
            entry["observedGeneration"] = generation
        merged.append(entry)
    kept = [dict(c) for t, c in before.items() if t not in {m["type"] for m in merged}]
    return [*merged, *kept][:16]


def _entry_key(entry: Mapping[str, Any]) -> tuple[Any, ...]:
    """A `recentActions` entry's identity, messages aside."""
    return tuple(entry.get(k) for k in ("time", "action", "pod", "node", "decision"))


def _conditions(
    findings: Findings, gates: Gates, policy: Policy, ignored: int, fleet: Fleet
) -> list[dict[str, Any]]:
    watched = len(findings.watched)
    polling = f"polling {watched + fleet.watched} watched pod(s)"
    if fleet.replicas:
        polling += (
            f" ({watched} by this replica, {fleet.watched} by {fleet.replicas} other replica(s))"
        )
    if ignored:
        polling += f"; ignoring {ignored} labelled pod(s) not injected for this policy"
    silent = [f.pod.name for f in findings.watched if f.unobservable]
    silent_elsewhere = fleet.counts.get(SIDECAR_UNREACHABLE, 0)
    gate = gates.first()
    if gate is not None:
        suppressed = _condition("ActionsSuppressed", True, _GATE_REASON[gate[0]], gate[1])
    elif policy.safety.dry_run:
        suppressed = _condition("ActionsSuppressed", True, "DryRun", "safety.dryRun is true")
    else:
        suppressed = _condition(
            "ActionsSuppressed", False, "ActionsAllowed", "no policy-wide limit"
        )
    faults = "; ".join(findings.faulty_nodes.values())
    return [
        _condition("Ready", True, "Polling", polling),
        suppressed,
        _condition(
            "SidecarsReachable",
            not silent and not silent_elsewhere,
            "SidecarUnreachable" if silent or silent_elsewhere else "AllAnswer",
            _silence(silent, silent_elsewhere),
        ),
        _condition(
            "NodeNetworkFault",
            bool(faults),
            "NodeNetworkFault" if faults else "NoNodeFault",
            faults or "no node is at fault",
        ),
    ]


def _silence(silent: Sequence[str], elsewhere: int) -> str:
    parts = [f"no answer from {', '.join(silent[:10])}"] if silent else []
    if elsewhere:
        parts.append(f"{elsewhere} pod(s) judged by other replicas do not answer")
    return "; ".join(parts) or "every sidecar answers"


def _condition(kind: str, status: bool, reason: str, message: str) -> dict[str, Any]:
    return {
        "type": kind,
        "status": "True" if status else "False",
        "reason": reason,
        "message": message[:32768],
    }
