"""The merged verdicts: each producer's own verdict with the socket, Spark and stack
views' findings and the evidence ladder, one verdict for the pod (pure).

After the pod-level rules, the pod's verdict is the first verdict, in the table's order,
that any source gives: a producer's telemetry (its own verdict, `telemetry.judge`), the
failing brokers, the socket view, the Python stacks, the evidence ladder, Spark's view.
Each `MergeRule` row of `hangwatch_sidecar.rules.RULES` names one source for one verdict;
the rows of one verdict stand together, and once one of them contributes, the verdict is
given with every contributing row's reasons in the table's order, then what the views
only corroborate (Spark's and the stacks' findings without a verdict). Each source here
is a function of the `Round` and the row's verdict, returning a `Contribution` or None.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hangwatch.contracts import Reachability, Verdict
from hangwatch_sidecar.assessment import MAX_CONNECTIONS_SHOWN, Assessment
from hangwatch_sidecar.evidence import BrokerObservation
from hangwatch_sidecar.round import Round
from hangwatch_sidecar.sockets.judge import failed_connects_reason
from hangwatch_sidecar.spark.judge import SparkFinding


@dataclass(frozen=True)
class Contribution:
    """What one source says for one verdict: reasons, and what they name."""

    reasons: tuple[str, ...] = ()
    producers: tuple[str, ...] = ()
    """The producers (keys) whose own verdict this is."""
    connections: tuple[str, ...] = ()
    """The pod's connections judged (the socket view's, the silence's)."""
    spark: tuple[SparkFinding, ...] = ()
    """Spark's findings judged (their threads and tasks are shown)."""
    threads: tuple[str, ...] = ()
    """The Python threads judged (the stacks', the ladder's)."""
    held: bool = False
    """The evidence held for a threshold of its own (`Assessment.held`)."""


def from_producers(r: Round, verdict: Verdict) -> Contribution | None:
    """The producers whose own verdict (the telemetry's rules) is `verdict`."""
    hit = [(k, a) for k, a in r.producers.items() if a.verdict is verdict]
    if not hit:
        return None
    return Contribution(
        tuple(f"producer {k}: {reason}" for k, a in hit for reason in a.reasons),
        producers=tuple(k for k, _ in hit),
    )


def from_brokers(r: Round, verdict: Verdict) -> Contribution | None:
    """The brokers and bootstrap entries failing the sidecar's probes, each named with
    its class, and the pod's failed connects while some refuse (S1)."""
    failing = r.cluster.failing
    if not failing:
        return None
    reasons = [_broker_reason(b) for b in failing]
    refusing = [b.address for b in failing if b.reachability == Reachability.REFUSED]
    if corroboration := failed_connects_reason(r.evidence.sockets, refusing):
        reasons.append(f"socket view: {corroboration}")
    return Contribution(tuple(reasons))


def _broker_reason(broker: BrokerObservation) -> str:
    never_a_broker = broker.node_id is None and not broker.advertised
    where = "bootstrap entry" if broker.in_bootstrap and never_a_broker else "broker"
    node = f" (node {broker.node_id})" if broker.node_id is not None else ""
    if broker.node_id is not None and not broker.advertised:
        node = f" (node {broker.node_id}, gone from the cluster's metadata)"
    detail = f": {broker.detail}" if broker.detail else ""
    return f"{where} {broker.address}{node} is {broker.reachability}{detail}"


def from_sockets(r: Round, verdict: Verdict) -> Contribution | None:
    """The socket view's findings of `verdict` (its silence is the ladder's)."""
    seen = [f for f in r.findings.sockets if f.verdict is verdict]
    if not seen:
        return None
    return Contribution(
        tuple(f"socket view: {f.reason}" for f in seen),
        connections=tuple(c for f in seen for c in f.connections),
    )


def _ladder_says(r: Round, verdict: Verdict) -> bool:
    weighed = r.findings.weighed
    return weighed is not None and weighed.verdict is verdict


def from_stacks(r: Round, verdict: Verdict) -> Contribution | None:
    """The Python stack view's findings of `verdict`, unless the evidence ladder gives
    the same verdict (its reasons then carry them)."""
    if _ladder_says(r, verdict):
        return None
    stacked = [f for f in r.findings.stacks if f.verdict is verdict]
    if not stacked:
        return None
    return Contribution(
        tuple(f.reason for f in stacked), threads=tuple(t for f in stacked for t in f.threads)
    )


def from_ladder(r: Round, verdict: Verdict) -> Contribution | None:
    """What the evidence ladder made of the pod's silence, when that is `verdict`."""
    weighed, silence = r.findings.weighed, r.findings.silence
    if weighed is None or weighed.verdict is not verdict:
        return None
    return Contribution(
        weighed.reasons,
        connections=silence.connections if silence else (),
        threads=weighed.threads,
        held=bool(silence and silence.past_write_interval),
    )


def from_spark(r: Round, verdict: Verdict) -> Contribution | None:
    """Spark's findings of `verdict` about this executor (its threads, its tasks)."""
    judged = [f for f in r.findings.spark if f.verdict is verdict]
    if not judged:
        return None
    return Contribution(tuple(f"{r.spark_label}: {f.reason}" for f in judged), spark=tuple(judged))


def merged(r: Round, verdict: Verdict, contributions: list[Contribution]) -> Assessment:
    """The pod's `verdict` with every contribution's reasons (in the table's order), what
    the views only corroborate, and the evidence they name."""
    found = r.findings
    corroborating = [f for f in found.spark if f.verdict is None]
    reasons = [reason for c in contributions for reason in c.reasons]
    reasons += [f"{r.spark_label}: {f.reason}" for f in corroborating]
    reasons += [f.reason for f in found.stacks if f.verdict is None and not f.clears_silence]
    shown: dict[str, Any] = {
        "producers": [k for c in contributions for k in c.producers],
        "brokers": r.brokers,
    }
    if named := sorted({n for c in contributions for n in c.connections}):
        shown["connections_judged"] = named[:MAX_CONNECTIONS_SHOWN]
    shown |= _spark_evidence([f for c in contributions for f in c.spark] + corroborating)
    if threads := sorted({t for c in contributions for t in c.threads}):
        shown["threads_judged"] = threads
    return Assessment(
        verdict, tuple(reasons), r.with_sockets(shown), held=any(c.held for c in contributions)
    )


def _spark_evidence(findings: list[SparkFinding]) -> dict[str, Any]:
    """The threads and tasks Spark findings name (the view itself is in /status `spark`)."""
    threads = sorted({t for f in findings for t in f.threads})
    tasks = sorted({t for f in findings for t in f.tasks})
    return {k: v for k, v in (("spark_threads", threads), ("spark_tasks", tasks)) if v}
