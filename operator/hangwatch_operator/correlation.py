"""Correlation across the pods of one policy: each pod's effective verdict.

Fed by `status_polling` (one `sidecar_status.PodReport` per pod, terminating pods included but not
polled); feeds `decisions`. A sidecar sees the cluster from one pod only; the operator
sees every pod of a policy and can tell where a fault lies:

- every answering pod is cut off from Kafka (no broker answers): a **cluster outage**;
  pods keep `cluster_unreachable` and nothing disruptive may happen;
- the answering pods of one node are all cut off, there are at least
  `safety.nodeFaultMinPods` of them (2 by default), and pods on at least
  `WITNESS_NODES_MIN` (2) other nodes reach the brokers: the node's network is at
  fault, and those pods become `node_network_fault`;
- otherwise each pod keeps the verdict its sidecar reported.

Pods whose verdict is `partitions_unwritable` (the cluster refuses writes to partitions
they write: one broker's maintenance under `min.insync.replicas` refuses every executor
of every job writing the topic at once) are also grouped by the topics their sidecars
name (`Findings.unwritable`, at most `MAX_TOPICS`; pods naming none under `""`), so that
the operator says it once per topic, not once per pod (`decisions`).

Blaming a node can get it cordoned, with every other tenant's pods on it, so one pod is
never enough: whoever runs a pod decides what its sidecar sees (its DNS, its host
aliases, in legacy mode the sidecar process itself). Two witness nodes keep a fault
between two nodes from being read as a fault of either.

A pod whose sidecar did not answer has no verdict (`sidecar_unreachable`); it neither
proves nor disproves a fault. Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from hangwatch.contracts import Verdict
from hangwatch.pod_security import Feature
from hangwatch.wire.status import FailureBudget
from hangwatch_operator.policies import NODE_FAULT_MIN_PODS
from hangwatch_operator.sidecar_status import PodReport, UnwritableTopic
from hangwatch_operator.watched import WatchedPod

SIDECAR_UNREACHABLE = "sidecar_unreachable"
"""Status/metrics name of a pod whose sidecar did not answer (not a verdict)."""
WITNESS_NODES_MIN = 2
"""Other nodes whose pods must reach the brokers before a node is blamed."""
NOT_UNHEALTHY = frozenset({Verdict.HEALTHY, Verdict.UNKNOWN})
"""`unknown` is not enough evidence to count a pod as unhealthy (e.g. no telemetry yet)."""
BY_TOPIC = frozenset({Verdict.PARTITIONS_UNWRITABLE})
"""Verdicts said once per topic (the cluster's refusal of a topic covers every pod
writing it), not once per pod."""
MAX_TOPICS = 50
"""Topics one policy's findings name at most; pods of more are grouped under
`MORE_TOPICS`."""
MORE_TOPICS = "(more topics)"
"""The group of the topics beyond `MAX_TOPICS` (no Kafka topic has a space or a
parenthesis in its name)."""


@dataclass(frozen=True)
class PodFinding:
    """One pod after correlation."""

    pod: WatchedPod
    verdict: Verdict | None
    """Effective verdict; None when the sidecar did not answer (or the pod terminates)."""
    reported: Verdict | None = None
    """What the sidecar itself said (differs for `node_network_fault`)."""
    reasons: tuple[str, ...] = ()
    since: float | None = None
    error: str | None = None
    """Why the sidecar did not answer."""
    failure_budget: FailureBudget | None = None
    """The application's executor failure budget, as the pod's sidecar read it."""
    brokers: tuple[str, ...] = ()
    """Broker addresses the pod's sidecar could not use in its last probe."""
    not_judged: tuple[Feature, ...] = ()
    """Features the pod's Pod Security level left out, as its sidecar said."""
    unwritable: tuple[UnwritableTopic, ...] = ()
    """The topics whose writes the cluster refuses, as its sidecar named them."""

    @property
    def unhealthy(self) -> bool:
        return self.verdict is not None and self.verdict not in NOT_UNHEALTHY

    @property
    def unobservable(self) -> bool:
        return self.verdict is None and not self.pod.terminating


@dataclass(frozen=True)
class TopicFinding:
    """One topic the cluster refuses writes to, and the pods of a policy that say so."""

    topic: str
    """"" for pods whose sidecars name no topic."""
    pods: tuple[PodFinding, ...]
    partitions: tuple[int, ...] = ()
    """The partitions the pods name, together."""
    reason: str = ""
    """The first pod's sentence for the topic (the ISR against min.insync.replicas)."""

    @property
    def since(self) -> float | None:
        """When the first of its pods took the verdict."""
        return min((p.since for p in self.pods if p.since is not None), default=None)


@dataclass(frozen=True)
class Findings:
    """The correlated state of one policy's pods in one poll round."""

    pods: tuple[PodFinding, ...]
    outage: bool = False
    """Every answering pod is cut off from Kafka."""
    faulty_nodes: Mapping[str, str] = field(default_factory=dict)
    """Node -> why it is at fault (names the brokers and the pods elsewhere that reach them)."""
    unwritable: Mapping[str, TopicFinding] = field(default_factory=dict)
    """Topic -> the watched pods whose verdict says the cluster refuses writes to it."""

    @property
    def watched(self) -> tuple[PodFinding, ...]:
        """Pods that count: running and not being deleted."""
        return tuple(f for f in self.pods if not f.pod.terminating)

    @property
    def present(self) -> frozenset[str]:
        """Keys of every pod still in the cluster (terminating ones included)."""
        return frozenset(f.pod.key for f in self.pods)

    def counts(self) -> dict[str, int]:
        """Watched pods per verdict (every verdict present, zero or not) and unreachable."""
        tally = Counter(str(f.verdict) for f in self.watched if f.verdict is not None)
        counts = {str(v): tally.get(str(v), 0) for v in Verdict}
        counts[SIDECAR_UNREACHABLE] = sum(1 for f in self.watched if f.unobservable)
        return counts

    def not_judged(self) -> dict[Feature, int]:
        """Watched pods per feature their Pod Security level left out (absent: none)."""
        tally = Counter(f for p in self.watched for f in p.not_judged)
        return {f: tally[f] for f in Feature if tally[f]}

    def with_verdict(self, verdict: Verdict) -> tuple[PodFinding, ...]:
        return tuple(f for f in self.watched if f.verdict is verdict)


def correlate(
    reports: Sequence[PodReport], *, node_fault_min_pods: int = NODE_FAULT_MIN_PODS
) -> Findings:
    """Effective verdicts for one policy's pods (see the module docstring for the rules)."""
    live = [r for r in reports if not r.pod.terminating]
    answering = [r for r in live if r.status is not None]
    cut_off = [r for r in answering if r.status is not None and r.status.cut_off]
    outage = bool(answering) and len(cut_off) == len(answering)
    faulty = {} if outage else _faulty_nodes(answering, node_fault_min_pods)
    pods = tuple(_finding(r, faulty) for r in reports)
    return Findings(pods=pods, outage=outage, faulty_nodes=faulty, unwritable=by_topic(pods))


def by_topic(pods: Sequence[PodFinding]) -> dict[str, TopicFinding]:
    """The watched pods with a `BY_TOPIC` verdict, grouped by the topics they name."""
    grouped: dict[str, list[tuple[PodFinding, UnwritableTopic | None]]] = defaultdict(list)
    for pod in pods:
        if pod.pod.terminating or pod.verdict not in BY_TOPIC:
            continue
        for named in pod.unwritable or (None,):
            topic = named.topic if named is not None else ""
            if topic not in grouped and len(grouped) >= MAX_TOPICS:
                topic = MORE_TOPICS
            grouped[topic].append((pod, named))
    found = {}
    for topic, entries in sorted(grouped.items()):
        unique = tuple({p.pod.key: p for p, _ in entries}.values())
        parts = sorted({i for _, n in entries if n is not None for i in n.partitions})
        reason = next((n.reason for _, n in entries if n is not None and n.reason), "")
        if not reason:
            reason = next((r for p, _ in entries for r in p.reasons), "")
        found[topic] = TopicFinding(topic, unique, tuple(parts), reason)
    return found


def _faulty_nodes(answering: Sequence[PodReport], min_pods: int) -> dict[str, str]:
    by_node: dict[str, list[PodReport]] = defaultdict(list)
    for report in answering:
        if report.pod.node:
            by_node[report.pod.node].append(report)
    faulty: dict[str, str] = {}
    for node, reports in sorted(by_node.items()):
        if len(reports) < min_pods or not all(r.status and r.status.cut_off for r in reports):
            continue
        witnesses = [
            r
            for other, others in by_node.items()
            if other != node
            for r in others
            if r.status is not None and r.status.reaches_cluster
        ]
        if len({r.pod.node for r in witnesses}) >= WITNESS_NODES_MIN:
            faulty[node] = _fault_reason(node, reports, witnesses)
    return faulty


def _fault_reason(node: str, cut: Sequence[PodReport], witnesses: Sequence[PodReport]) -> str:
    brokers = sorted({b for r in cut if r.status for b in r.status.failing_brokers})
    elsewhere = sorted({r.pod.node or "" for r in witnesses})
    broker_text = ", ".join(brokers[:5]) or "the brokers"
    return (
        f"{len(cut)} pod(s) on node {node} reach none of {broker_text} while "
        f"{len(witnesses)} pod(s) on node(s) {', '.join(elsewhere[:5])} reach the cluster"
    )


def _finding(report: PodReport, faulty: Mapping[str, str]) -> PodFinding:
    status = report.status
    if report.pod.terminating or status is None:
        return PodFinding(report.pod, None, error=report.error)
    if report.pod.node in faulty:
        return PodFinding(
            report.pod,
            Verdict.NODE_NETWORK_FAULT,
            reported=status.verdict,
            reasons=(faulty[report.pod.node or ""], *status.reasons),
            since=status.since,
            failure_budget=status.failure_budget,
            brokers=status.failing_brokers,
            not_judged=status.not_judged,
            unwritable=status.unwritable,
        )
    return PodFinding(
        report.pod,
        status.verdict,
        status.verdict,
        status.reasons,
        status.since,
        failure_budget=status.failure_budget,
        brokers=status.failing_brokers,
        not_judged=status.not_judged,
        unwritable=status.unwritable,
    )
