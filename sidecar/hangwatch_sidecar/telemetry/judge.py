"""The telemetry's judgement: each producer's rules, over one producer's telemetry (pure).

Each function here is a rule of `hangwatch_sidecar.rules.RULES` (a `ProducerRule` row
names it, with its verdict and one-line reason): it takes a `ProducerRound` - one
producer's `ProducerObservation`, the cluster as this round probed it, the thresholds,
whether every member broker answers and metadata came - and returns an `Assessment`
or None (not its to judge). A producer's verdict is the first rule's, in the table's
order; the rule's evidence is added to the producer's own (`ProducerRound.evidence`).
The cluster answers from this pod whenever these run: the pod-level rules before them
took unreachable clusters and elections.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from hangwatch.contracts import Verdict
from hangwatch_sidecar.assessment import Assessment, Thresholds
from hangwatch_sidecar.evidence import ClusterObservation, ErrorObserved, ProducerObservation
from hangwatch_sidecar.probe.types import UNKNOWN_TOPIC
from hangwatch_sidecar.telemetry.refusals import (
    MAX_NAMED,
    absent_reason,
    absent_topics,
    refusal_evidence,
    refusal_reason,
    refusals,
)


@dataclass(frozen=True)
class ProducerRound:
    """What a producer's rule receives: one producer's telemetry and what it is judged
    against this round, with what several rules share derived once (on first use)."""

    producer: ProducerObservation
    cluster: ClusterObservation
    thresholds: Thresholds
    cluster_healthy: bool
    """Every member broker answers the sidecar and metadata came."""

    @cached_property
    def evidence(self) -> dict[str, Any]:
        """What every assessment of this producer shows (a rule adds its own)."""
        p = self.producer
        return {
            "pid": p.pid,
            "pending": p.pending,
            "delivered_total": p.delivered_total,
            "failed_total": p.failed_total,
            "heartbeat_age_seconds": round(p.heartbeat_age_seconds, 3),
            "progress_age_seconds": None
            if p.progress_age_seconds is None
            else round(p.progress_age_seconds, 3),
            "pending_seconds": round(p.pending_seconds, 3),
            **dict(p.identity),
        }

    @cached_property
    def absent(self) -> frozenset[str]:
        """The producer's topics the cluster's metadata says do not exist."""
        return frozenset(self.cluster.absent_for(self.producer.topics))

    @cached_property
    def throttled(self) -> bool:
        """A broker's quota explains its wait: slow, not hung (a restart meets the quota)."""
        return self.producer.throttled(self.thresholds.stall_seconds)

    @cached_property
    def stalled(self) -> bool:
        """Messages pending with no delivery for the stall threshold, and no quota's
        throttle to explain it."""
        p, stall = self.producer, self.thresholds.stall_seconds
        return (
            not self.throttled
            and p.pending > 0
            and p.pending_seconds > stall
            and (p.progress_age_seconds is None or p.progress_age_seconds > stall)
        )

    def throttle_evidence(self) -> dict[str, Any]:
        """The throttle a broker's quota holds the producer to, while it explains waits."""
        if not self.throttled:
            return {}
        return {
            "throttle_age_seconds": round(self.producer.throttle_age_seconds or 0.0, 1),
            "throttle_seconds": round(self.producer.throttle_seconds, 3),
        }


ProducerJudge = Callable[[ProducerRound], Assessment | None]
"""A producer's rule: its assessment of one producer, or None (not its to judge)."""


def judge_producer(round_: ProducerRound, rules: Sequence[ProducerJudge]) -> Assessment:
    """The first of `rules` that judges, with the producer's evidence; `healthy` when none
    does."""
    for rule in rules:
        found = rule(round_)
        if found is not None:
            return Assessment(found.verdict, found.reasons, {**round_.evidence, **found.evidence})
    return Assessment(Verdict.HEALTHY, (), dict(round_.evidence))


def telemetry_unusable(r: ProducerRound) -> Assessment | None:
    """The telemetry could not be used (garbage, too large, wrong schema...)."""
    if r.producer.problem:
        return Assessment(Verdict.UNKNOWN, (r.producer.problem,))
    return None


def producer_exited(r: ProducerRound) -> Assessment | None:
    """The producer's liveness lock is free: its process has exited."""
    if r.producer.alive is False:
        return Assessment(Verdict.UNKNOWN, ("producer process has exited",))
    return None


def heartbeat_stopped(r: ProducerRound) -> Assessment | None:
    """An open wrapper producer refreshes its telemetry from its poll loop even when idle,
    so a live process whose telemetry stopped has a blocked poll loop (S4). Its last
    snapshot's pending count is stale: sends since then are queued behind the block. (The
    Java reporter's own thread writes its telemetry: no I/O loop's pulse.)"""
    p, heartbeat = r.producer, r.thresholds.heartbeat_seconds
    if p.heartbeat_age_seconds <= heartbeat or p.alive is not True or p.java:
        return None
    return Assessment(
        Verdict.PRODUCER_HUNG,
        (
            f"telemetry heartbeat stopped {p.heartbeat_age_seconds:.0f} s ago "
            f"(threshold {heartbeat:.0f} s) while the process lives "
            f"({p.pending} messages pending at its last heartbeat): its I/O loop "
            "is blocked",
        ),
    )


def refused_writes(r: ProducerRound) -> Assessment | None:
    """Its telemetry names refusals the next client meets again (`refusals`)."""
    refused = refusals(r.producer, r.thresholds, r.absent)
    if not refused:
        return None
    return Assessment(
        Verdict.WRITES_REJECTED,
        tuple(refusal_reason(e, e.topic in r.absent) for e in refused),
        {"writes_rejected": [refusal_evidence(e) for e in refused[:MAX_NAMED]]},
    )


def absent_topic(r: ProducerRound) -> Assessment | None:
    """Stalled on a topic the cluster itself says does not exist (with automatic creation
    off, librdkafka waits topic.metadata.propagation.max.ms before naming any error): the
    next producer is refused the same way, so this is never metadata_stale."""
    waiting_for = absent_topics(r.producer, r.cluster) if r.stalled else []
    if not waiting_for:
        return None
    age = r.cluster.metadata_age_seconds or 0.0
    pending = r.producer.pending
    return Assessment(
        Verdict.WRITES_REJECTED,
        tuple(absent_reason(t, r.producer, age) for t in waiting_for),
        {
            "writes_rejected": [
                refusal_evidence(ErrorObserved(UNKNOWN_TOPIC, t, pending, age))
                for t in waiting_for[:MAX_NAMED]
            ]
        },
    )


def java_client(r: ProducerRound) -> Assessment | None:
    """The Java client's reporter names refusals and throttles; its counters alone are no
    proof of a hang (the client retries and expires batches by itself, and a
    restart-class verdict needs the JVM's threads): Spark's view judges those."""
    if not r.producer.java:
        return None
    return Assessment(Verdict.HEALTHY, (), r.throttle_evidence())


def _answered(r: ProducerRound) -> bool:
    """Brokers keep answering the producer (responses grow, nothing awaits an answer)."""
    p = r.producer
    return (
        p.answered_age_seconds is not None
        and p.answered_age_seconds <= r.thresholds.stall_seconds
        and p.awaiting_responses == 0
    )


def answered_not_delivered(r: ProducerRound) -> Assessment | None:
    """Brokers keep answering yet nothing is delivered: the producer's requests are
    refused, its view of the cluster is wrong (S1). A producer whose requests go
    unanswered (S2) awaits responses instead."""
    if not (r.stalled and r.cluster_healthy and _answered(r)):
        return None
    p = r.producer
    return Assessment(
        Verdict.METADATA_STALE,
        (
            f"{p.pending} messages pending for {p.pending_seconds:.0f} s: "
            "brokers keep answering its requests but nothing is delivered (its view of the "
            "cluster is wrong) while every broker answers and every partition has a leader",
        ),
        {"answered_age_seconds": round(p.answered_age_seconds or 0.0, 3)},
    )


def stalled_unanswered(r: ProducerRound) -> Assessment | None:
    """Messages pending with no delivery while every broker answers the sidecar (S2)."""
    if not (r.stalled and r.cluster_healthy):
        return None
    p, since = r.producer, r.producer.progress_age_seconds
    return Assessment(
        Verdict.PRODUCER_HUNG,
        (
            f"{p.pending} messages pending for {p.pending_seconds:.0f} s and "
            + ("no delivery ever" if since is None else f"no delivery for {since:.0f} s")
            + f" (threshold {r.thresholds.stall_seconds:.0f} s) while every broker answers",
        ),
    )


def leader_disagreements(producer: ProducerObservation, cluster: ClusterObservation) -> list[str]:
    """Partitions whose leader the producer names differently from the cluster's metadata."""
    out = []
    for tp, leader in sorted(producer.leaders.items()):
        actual = cluster.leaders.get(tp)
        if actual is not None and actual >= 0 and leader != actual:
            out.append(f"{tp[0]}/{tp[1]}: producer says {leader}, cluster says {actual}")
    return out


def _metadata_evidence(r: ProducerRound) -> dict[str, Any]:
    """The throttle, the leader disagreements and the metadata's age, as far as known."""
    p, shown = r.producer, r.throttle_evidence()
    if disagreements := leader_disagreements(p, r.cluster):
        shown["leader_disagreements"] = disagreements[:20]
        shown["disagreeing_seconds"] = round(p.disagreeing_seconds, 1)
    if p.metadata_age_seconds is not None:
        shown["metadata_age_seconds"] = round(p.metadata_age_seconds, 1)
    return shown


def _disagreement_reason(r: ProducerRound) -> str | None:
    """Leaders moved longer than an election ago and the producer, with messages to send,
    has not refreshed since. Both clocks count: its metadata's age alone is no proof (a
    producer that last refreshed 9 s before an election has 9 s old metadata the moment
    leaders move; on Apache Kafka that was called stale while the producer recovered), nor
    is the disagreement's age alone (the sidecar's own metadata may be the old one: it is
    fetched again when a disagreement starts). An idle producer's cached leaders are no
    fault: its next send is answered NOT_LEADER and refreshes them, or its periodic
    refresh does (a task paused through an election was restarted for this in the
    false-restart soak); if its sends then keep failing, `failing_seconds` says so."""
    p, grace = r.producer, r.thresholds.election_grace_seconds
    disagreements = leader_disagreements(p, r.cluster)
    age = p.metadata_age_seconds
    if not (disagreements and p.pending > 0 and p.disagreeing_seconds > grace):
        return None
    if age is None or age <= grace:
        return None
    return (
        f"producer's leaders have disagreed with the cluster's on {len(disagreements)} "
        f"partitions for {p.disagreeing_seconds:.0f} s (election grace "
        f"{grace:.0f} s) and its metadata is {age:.0f} s old"
    )


def stale_metadata(r: ProducerRound) -> Assessment | None:
    """Its leaders disagree with the cluster's past the grace, its metadata is too old, or
    its sends keep failing while the cluster is healthy (S1)."""
    p, t = r.producer, r.thresholds
    reasons = []
    if disagreement := _disagreement_reason(r):
        reasons.append(disagreement)
    elif p.metadata_age_seconds is not None and p.metadata_age_seconds > t.metadata_max_age_seconds:
        reasons.append(
            f"producer's metadata is {p.metadata_age_seconds:.0f} s old "
            f"(allowed {t.metadata_max_age_seconds:.0f} s)"
        )
    if r.cluster_healthy and p.failing_seconds > t.stall_seconds:
        reasons.append(
            f"sends have failed for {p.failing_seconds:.0f} s with no delivery "
            "while every broker answers and every partition has a leader"
        )
    if not reasons:
        return None
    return Assessment(Verdict.METADATA_STALE, tuple(reasons), _metadata_evidence(r))


def stalled_while_brokers_fail(r: ProducerRound) -> Assessment | None:
    """Messages pending with no delivery while some member broker fails: not its fault."""
    p = r.producer
    if r.cluster_healthy or p.pending <= 0 or p.pending_seconds <= r.thresholds.stall_seconds:
        return None
    return Assessment(
        Verdict.BROKER_DEGRADED,
        ("producer is stalled while some brokers fail: not a producer fault",),
        _metadata_evidence(r),
    )


def producer_healthy(r: ProducerRound) -> Assessment | None:
    """Nothing above judged: healthy, with what was looked at."""
    return Assessment(Verdict.HEALTHY, (), _metadata_evidence(r))
