"""The pod-level rules: the cluster's faults that cover every producer, and the quiet
rules that close the table (pure).

Each function here is a rule of `hangwatch_sidecar.rules.RULES` (a `PodRule` row names
it, with its verdict and one-line reason): it takes the `Round` and returns the pod's
`Assessment`, or None (not its to judge). `no_probe_round`, `cluster_unreachable` and
`leader_election` come first: a restart only helps when the cluster itself is healthy
(docs/incidents.md), so while it is not, every producer takes the pod's verdict.
`nothing_to_judge` and `healthy` come last, after the merged verdicts
(`hangwatch_sidecar.merge`).
"""

from __future__ import annotations

from typing import Any

from hangwatch.contracts import Verdict
from hangwatch_sidecar.assessment import Assessment
from hangwatch_sidecar.round import Round
from hangwatch_sidecar.sockets.judge import judge_sockets
from hangwatch_sidecar.sockets.types import SocketObservation
from hangwatch_sidecar.spark.judge import unavailable_reason
from hangwatch_sidecar.spark.types import SparkView

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
