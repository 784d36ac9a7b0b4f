"""The pod-level rules: the cluster's faults that cover every producer, and the quiet
rules that close the table (pure).

Each function here is a rule of `hangwatch_sidecar.rules.RULES` (a `PodRule` row names
it, with its verdict and one-line reason): it takes the `Round` and returns the pod's
`Assessment`, or None (not its to judge). `no_probe_round`, `cluster_unreachable` and
`leader_election` come first, then `partitions_unwritable` (the cluster refuses writes
to the pod's partitions for its own reason): a restart only helps when the cluster
itself is healthy (docs/incidents.md), so while it is not, every producer takes the
pod's verdict.
`nothing_to_judge` and `healthy` come last, after the merged verdicts
(`hangwatch_sidecar.merge`).
"""

from __future__ import annotations

from typing import Any

from hangwatch import kafka_errors
from hangwatch.acceptance import holds_to_min_insync
from hangwatch.contracts import Verdict
from hangwatch.verdicts import VERDICTS
from hangwatch.wire.status import UNWRITABLE_TOPICS
from hangwatch_sidecar.assessment import Assessment
from hangwatch_sidecar.probe.acceptance import (
    TopicAcceptance,
    acceptance,
    doubt_reason,
    refused_reason,
)
from hangwatch_sidecar.round import Round
from hangwatch_sidecar.sockets.judge import judge_sockets
from hangwatch_sidecar.sockets.types import SocketObservation
from hangwatch_sidecar.spark.judge import partition_refusals, unavailable_reason
from hangwatch_sidecar.spark.types import SparkView
from hangwatch_sidecar.telemetry.judge import ProducerRound, heartbeat_stopped

MAX_LEADERLESS_SHOWN = 50
"""Leaderless partitions an election's evidence lists at most."""


def no_probe_round(r: Round) -> Assessment | None:
    """Nothing to judge against until the first probe round completes."""
    if r.evidence.cluster is not None:
        return None
    return Assessment(Verdict.UNKNOWN, ("no probe round has completed yet",))


def cluster_unreachable(r: Round) -> Assessment | None:
    """No broker answers from this pod (S0); the socket view's blackholed connections
    corroborate."""
    if r.cluster.answering:
        return None
    failing = ", ".join(f"{b.address} {b.reachability}" for b in r.cluster.brokers)
    seen = judge_sockets(
        r.evidence.sockets,
        stall_seconds=r.thresholds.stall_seconds,
        request_timeout_seconds=r.thresholds.producer_request_timeout_seconds,
        cluster_healthy=False,
    )
    return Assessment(
        Verdict.CLUSTER_UNREACHABLE,
        (
            f"no broker answers from this pod: {failing or 'no brokers configured'}",
            *(f.reason for f in seen if f.verdict is Verdict.BROKER_DEGRADED),
        ),
        r.with_sockets({"brokers": r.brokers}),
    )


def leader_election(r: Round) -> Assessment | None:
    """Partitions the producers write to have no leader: expected within the election
    grace (S2), and still not the producers' fault beyond it."""
    producers, topics = r.evidence.producers, r.evidence.topics
    written = topics.union(*(p.topics for p in producers)) if producers else topics
    leaderless = r.cluster.leaderless_for(frozenset(written))
    if not leaderless:
        return None
    since, grace = r.evidence.leaderless_since, r.thresholds.election_grace_seconds
    held = 0.0 if since is None else r.now - since
    return Assessment(
        Verdict.LEADER_ELECTION,
        (
            f"{len(leaderless)} partitions without a leader for {held:.1f} s "
            + (
                "(within grace: expected during an election)"
                if held <= grace
                else f"(beyond the {grace:.0f} s grace)"
            ),
        ),
        {
            "leaderless": leaderless[:MAX_LEADERLESS_SHOWN],
            "leaderless_seconds": round(held, 3),
            "brokers": r.brokers,
        },
    )


UNWRITABLE_SHOWN = 20
"""Topics a `partitions_unwritable` assessment names at most (reasons and evidence)."""
GRACE_KEY = "refused_seconds_ago"
"""The evidence key of a `partitions_unwritable` given in the grace after the refusal was
last seen (the loop does not take it for the refusal seen again)."""
RESTART_CLASS = frozenset(p.verdict for p in VERDICTS if p.restart_may_help)
"""Verdicts a policy may restart for: what a refusal of the cluster holds back."""
Named = dict[str, tuple[list[int], list[str]]]
"""Topic -> (its refused partitions, the reasons naming them)."""


def partitions_unwritable(r: Round) -> Assessment | None:
    """The cluster refuses writes to partitions the pod's producers write, for its own
    reason: their ISR below min.insync.replicas (a producer with acks=all), their leader's
    log directory failed, or a producer (its telemetry, a failed task attempt) reports
    such a refusal. Where min.insync.replicas is unknown, or for one stall threshold
    after the refusal was last seen, it holds back a restart verdict the round would
    otherwise give (docs/sidecar.md, "The cluster's acceptance"). A producer whose own
    heartbeat stopped (S4) is left to its rule: its loop is blocked whatever the cluster
    says."""
    producers = r.evidence.producers
    if any(heartbeat_stopped(ProducerRound(p, r.cluster, r.thresholds, True)) for p in producers):
        return None
    holds = not producers or any(holds_to_min_insync(p.acks) for p in producers)
    topics = acceptance(r.cluster.partitions, r.cluster.min_insync, _written(r))
    named = _refused(r, topics, holds)
    if named:
        return _unwritable(r, named)
    if not _restart_pending(r):
        return None
    addresses = _addresses(r)
    doubtful: Named = {
        t.topic: ([p.partition for p in t.in_doubt], [doubt_reason(t, addresses)])
        for t in topics
        if holds and t.in_doubt
    }
    return _unwritable(r, doubtful) if doubtful else _after_refusal(r)


def _written(r: Round) -> frozenset[str]:
    producers, topics = r.evidence.producers, r.evidence.topics
    return topics.union(*(p.topics for p in producers)) if producers else topics


def _addresses(r: Round) -> dict[int, str]:
    """Node id -> `address: reachability`, for naming the brokers out of an ISR."""
    return {
        b.node_id: f"{b.address}: {b.reachability}"
        for b in r.cluster.brokers
        if b.node_id is not None
    }


def _refused(r: Round, topics: list[TopicAcceptance], holds: bool) -> Named:
    """The refusals the cluster's metadata shows, then those the producers report."""
    addresses = _addresses(r)
    named: Named = {}
    for found in topics:
        refused = found.refusing(holds=holds)
        if refused:
            reason = refused_reason(found, addresses, holds=holds)
            named[found.topic] = ([p.partition for p in refused], [reason])
    window = max(r.thresholds.stall_seconds, r.thresholds.heartbeat_seconds)
    for p in r.evidence.producers:
        for error in p.errors:
            info = kafka_errors.by_name(error.code)
            if kafka_errors.refuses_partition(info) and error.last_age_seconds <= window:
                named.setdefault(error.topic, ([], []))[1].append(
                    f"producer {p.key} meets {error.code} on topic {error.topic or '?'} "
                    f"({error.count} times, last {error.last_age_seconds:.0f} s ago): the "
                    "cluster refuses its writes for its own reason"
                )
    written = sorted(_written(r))
    for reason in partition_refusals(r.evidence.spark):
        topic = written[0] if len(written) == 1 else ""
        named.setdefault(topic, ([], []))[1].append(f"{r.spark_label}: {reason}")
    return named


def _restart_pending(r: Round) -> bool:
    """Whether a rule after this one would give the pod a verdict a policy may restart
    for (a producer's own, or a view's, or the evidence ladder's)."""
    found = r.findings
    verdicts: list[Verdict | None] = [a.verdict for a in r.producers.values()]
    verdicts += [f.verdict for f in found.sockets]
    verdicts += [f.verdict for f in found.spark]
    verdicts += [f.verdict for f in found.stacks]
    verdicts += [found.weighed.verdict] if found.weighed is not None else []
    return any(v in RESTART_CLASS for v in verdicts)


def _unwritable(r: Round, named: Named) -> Assessment:
    shown = sorted(named.items())[:UNWRITABLE_SHOWN]
    reasons = tuple(reason for _, (_, said) in shown for reason in said)
    topics = [
        {"topic": topic, "partitions": parts[:100], "reason": said[0]}
        for topic, (parts, said) in shown
        if topic
    ]
    return Assessment(
        Verdict.PARTITIONS_UNWRITABLE,
        reasons,
        {UNWRITABLE_TOPICS: topics, "brokers": r.brokers},
    )


def _after_refusal(r: Round) -> Assessment | None:
    """Within one stall threshold after the refusal was last seen: the producers' stall
    clocks ran through it, so a restart verdict now would be the refusal's."""
    seen, stall = r.evidence.refusal, r.thresholds.stall_seconds
    if seen is None or r.now - seen.at > stall:
        return None
    ago = r.now - seen.at
    return Assessment(
        Verdict.PARTITIONS_UNWRITABLE,
        (
            f"the cluster refused writes to the pod's partitions until {ago:.0f} s ago; no "
            f"restart verdict until one stall threshold ({stall:.0f} s) has passed since, "
            "while the producers' retries resume: what it said",
            *seen.reasons,
        ),
        {UNWRITABLE_TOPICS: list(seen.topics), GRACE_KEY: round(ago, 1), "brokers": r.brokers},
    )


def nothing_to_judge(r: Round) -> Assessment | None:
    """No producer telemetry, no connection of the pod to a broker and no Kafka producer
    thread in the executor's JVM: the cluster answers, and there is nothing to judge."""
    sockets, spark = r.evidence.sockets, r.evidence.spark
    connected = sockets is not None and sockets.available and bool(sockets.connections)
    jvm_producer = spark is not None and spark.producer_visible
    if r.evidence.producers or connected or jvm_producer:
        return None
    return Assessment(
        Verdict.UNKNOWN,
        (_nothing_to_judge(sockets, spark),),
        r.with_sockets({"brokers": r.brokers}),
    )


def _nothing_to_judge(sockets: SocketObservation | None, spark: SparkView | None) -> str:
    """Why `unknown`: no telemetry, no connection to a broker, no producer in the JVM."""
    if sockets is None:
        why = "no producer telemetry yet"
    elif not sockets.available:
        why = f"no producer telemetry yet, and no socket view ({sockets.error})"
    else:
        why = "no producer telemetry and no connection of the pod to a broker"
    if (missing := unavailable_reason(spark)) is not None:
        why += f"; {missing}"
    elif spark is not None:
        running = "no task" if not spark.task_running else f"{len(spark.tasks) or 'a'} task(s)"
        why += f" and no Kafka producer thread in the executor's JVM ({running} running)"
    return f"{why}; cluster answers"


def healthy(r: Round) -> Assessment | None:
    """Nothing above judged: healthy, with a silence a source cleared (the evidence
    ladder: the task busy elsewhere) in the evidence's `silence_cleared`."""
    shown: dict[str, Any] = {"brokers": r.brokers}
    weighed = r.findings.weighed
    if weighed is not None and weighed.verdict is None:
        shown["silence_cleared"] = list(weighed.reasons)
    return Assessment(Verdict.HEALTHY, (), r.with_sockets(shown))
