"""The verdict engine: evidence + thresholds + time -> one verdict with reasons.

Pure functions only. `evaluate` turns the latest `ClusterObservation`, the
`ProducerObservation`s (the wrapper's telemetry), the socket view of the pod's own
connections to brokers (`sockets.judge`, for any client) and Spark's view of the
executor (`spark.judge`: its tasks and, for a JVM producer, its threads) into a
`Verdict` for the pod and for each producer, with human-readable reasons and
machine-readable evidence. `Debouncer` adds hysteresis: a verdict replaces the current
one only after it has held for N evaluations in a row, so a single lost probe or a
1-2 s election never flips the pod.

Order of precedence (first match wins), following the incidents' lesson
(docs/incidents.md) that a restart helps only when the cluster itself is healthy:

1. no probe round yet -> `unknown`
2. no broker answers from this pod -> `cluster_unreachable`
3. partitions the producers write to have no leader -> `leader_election`
4. the cluster refuses a producer's writes for a reason the next client meets again (its
   telemetry's error codes, or Spark's failed task attempts of this executor, classified
   by `hangwatch.kafka_errors`: a record above the topic's limit, a missing ACL, refused
   credentials, a topic that does not exist) -> `writes_rejected`, alert only; it comes
   before the restart verdicts below, whose evidence (pending without delivery, sends
   failing while brokers answer) such a refusal also produces. A producer whose heartbeat
   stopped (S4) is `producer_hung` first: its loop is blocked whatever it met before
5. a producer is stuck while the cluster is healthy -> `producer_hung`: its requests go
   unanswered (S2) or its heartbeat stopped (S4); but a stuck producer whose requests
   brokers keep answering without a delivery (S1) -> `metadata_stale`. Without
   telemetry the socket view decides on a request unanswered on a live connection;
   Spark's view for a JVM producer (its I/O thread held in a user callback, a send's
   result never coming; waits for metadata -> `metadata_stale`); the Python stack view
   for a Python producer (a thread held inside a delivery callback the client called).
   With telemetry all add their reasons; a straggler task only corroborates
6. a producer's metadata disagrees / is too old / it keeps failing -> `metadata_stale`
7. every connection of the pod silent while Spark runs a task of this executor, or
   longer than the expected write interval a policy declared (unless Spark's view says
   no task of this executor runs): the evidence ladder (`ladder`) decides -
   `producer_hung` on positive evidence (a thread inside the client while nothing is
   sent), cleared when a source shows the task busy
   elsewhere (the wrapper's telemetry: nothing pending; stacks: no thread in a client),
   else `producer_silent` (silence alone: alert only, never a restart by default)
8. some brokers or bootstrap entries fail (producers can still work), or the pod's own
   connections to a broker are blackholed -> `broker_degraded`
9. no producer telemetry, no connection of the pod to a broker and no Kafka producer
   thread in the executor's JVM -> `unknown` (cluster fine, nothing to judge)
10. otherwise -> `healthy`
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from hangwatch import kafka_errors
from hangwatch.contracts import Verdict
from hangwatch.defaults import STANDALONE
from hangwatch.wire import status
from hangwatch_sidecar.evidence import ClusterObservation, ErrorObserved, ProducerObservation
from hangwatch_sidecar.ladder import SilenceWeighed, weigh_silence
from hangwatch_sidecar.probe.types import UNKNOWN_TOPIC
from hangwatch_sidecar.pystacks.judge import HeldView, StackFinding, judge_stacks
from hangwatch_sidecar.sockets.judge import SocketFinding, failed_connects_reason, judge_sockets
from hangwatch_sidecar.sockets.types import SocketObservation
from hangwatch_sidecar.spark.judge import SparkFinding, judge_spark, unavailable_reason
from hangwatch_sidecar.spark.types import SparkView

MAX_CONNECTIONS_SHOWN = status.MAX_CONNECTIONS
"""Connections listed in a verdict's evidence at most (outstanding and blackholed first),
as many as /status lists."""


@dataclass(frozen=True)
class Thresholds:
    """Detection thresholds, in seconds (the sidecar's settings fill these; the defaults are
    `hangwatch.defaults.STANDALONE`)."""

    stall_seconds: float = float(STANDALONE.stall_seconds)
    """Pending messages with no delivery for this long while the cluster is healthy is a
    hang. librdkafka's default request timeout is 30 s; a healthy producer delivers or
    fails well within it."""
    heartbeat_seconds: float = float(STANDALONE.heartbeat_seconds)
    """Telemetry unchanged this long while the process lives means the producer's poll
    loop stopped (S4). Telemetry refreshes every statistics interval (1 s by default)."""
    metadata_max_age_seconds: float = float(STANDALONE.metadata_max_age_seconds)
    """A producer whose metadata is older than this is stale (S1). A healthy producer's
    topic metadata ages up to its refresh interval (the wrapper: 60 s) and librdkafka
    expires its cache at metadata.max.age.ms (the wrapper: 180 s). A leader disagreement
    counts once the producer's metadata is older than the election grace."""
    election_grace_seconds: float = float(STANDALONE.election_grace_seconds)
    """Leaderless partitions are expected this long (S2: managed Kafka elections take
    1-2 s; controlled shutdowns up to ~10 s); past it they still block restarts."""
    producer_request_timeout_seconds: float = float(STANDALONE.producer_request_timeout_seconds)
    """The producers' own request timeout: a request the socket view sees unanswered is the
    broker's business until it has waited this long (a broker may hold it), the
    producer's fault only past it (`sockets.judge`)."""
    expected_write_interval_seconds: float | None = None
    """How often the pod's producers write at least, when someone said so (a policy's
    `detection.expectedWriteIntervalSeconds`): every connection of the pod silent longer
    than this is silence to weigh even when Spark's view does not say a task runs
    (`sockets.judge`). None: silence counts only while Spark runs a task."""


@dataclass(frozen=True)
class Assessment:
    """A verdict with its reasons (sentences) and evidence (numbers and names)."""

    verdict: Verdict
    reasons: tuple[str, ...] = ()
    evidence: dict[str, Any] = field(default_factory=dict)
    held: bool = False
    """The verdict's evidence already held for a threshold of its own, so `Debouncer`
    may take it at once (`HELD_WHEN_MEASURED`); not part of /status."""


@dataclass(frozen=True)
class PodAssessment:
    """The pod's verdict and each producer's."""

    pod: Assessment
    producers: dict[str, Assessment]


def _brokers_evidence(cluster: ClusterObservation) -> dict[str, Any]:
    return {
        b.address: {
            "reachability": str(b.reachability),
            "node_id": b.node_id,
            "in_bootstrap": b.in_bootstrap,
            "advertised": b.advertised,
            "latency_ms": b.latency_ms,
        }
        for b in cluster.brokers
    }


def leader_disagreements(producer: ProducerObservation, cluster: ClusterObservation) -> list[str]:
    """Partitions whose leader the producer names differently from the cluster's metadata."""
    out = []
    for tp, leader in sorted(producer.leaders.items()):
        actual = cluster.leaders.get(tp)
        if actual is not None and actual >= 0 and leader != actual:
            out.append(f"{tp[0]}/{tp[1]}: producer says {leader}, cluster says {actual}")
    return out


def assess_producer(
    producer: ProducerObservation,
    cluster: ClusterObservation,
    thresholds: Thresholds,
    cluster_healthy: bool,
) -> Assessment:
    """The verdict for one producer, assuming the cluster answers from this pod."""
    ev: dict[str, Any] = {
        "pid": producer.pid,
        "pending": producer.pending,
        "delivered_total": producer.delivered_total,
        "failed_total": producer.failed_total,
        "heartbeat_age_seconds": round(producer.heartbeat_age_seconds, 3),
        "progress_age_seconds": None
        if producer.progress_age_seconds is None
        else round(producer.progress_age_seconds, 3),
        "pending_seconds": round(producer.pending_seconds, 3),
        **dict(producer.identity),
    }
    if producer.problem:
        return Assessment(Verdict.UNKNOWN, (producer.problem,), ev)
    if producer.alive is False:
        return Assessment(Verdict.UNKNOWN, ("producer process has exited",), ev)
    if (
        producer.heartbeat_age_seconds > thresholds.heartbeat_seconds
        and producer.alive is True
        and not producer.java  # the Java reporter's own thread writes: no I/O loop's pulse
    ):
        # An open producer refreshes telemetry from its poll loop even when idle, so a live
        # process whose telemetry stopped has a blocked poll loop (S4). Its last snapshot's
        # pending count is stale: sends since then are queued behind the block.
        return Assessment(
            Verdict.PRODUCER_HUNG,
            (
                f"telemetry heartbeat stopped {producer.heartbeat_age_seconds:.0f} s ago "
                f"(threshold {thresholds.heartbeat_seconds:.0f} s) while the process lives "
                f"({producer.pending} messages pending at its last heartbeat): its I/O loop "
                "is blocked",
            ),
            ev,
        )
    absent = frozenset(cluster.absent_for(producer.topics))
    refused = refusals(producer, thresholds, absent)
    if refused:
        ev["writes_rejected"] = [_refusal_evidence(e) for e in refused[:10]]
        reasons = tuple(_refusal_reason(e, e.topic in absent) for e in refused)
        return Assessment(Verdict.WRITES_REJECTED, reasons, ev)
    throttled = producer.throttled(thresholds.stall_seconds)
    if throttled:
        ev["throttle_age_seconds"] = round(producer.throttle_age_seconds or 0.0, 1)
        ev["throttle_seconds"] = round(producer.throttle_seconds, 3)
    # A producer a broker's quota throttles is slow, not hung: a restart meets the quota.
    stalled = (
        not throttled
        and producer.pending > 0
        and producer.pending_seconds > thresholds.stall_seconds
        and (
            producer.progress_age_seconds is None
            or producer.progress_age_seconds > thresholds.stall_seconds
        )
    )
    waiting_for = absent_topics(producer, cluster) if stalled else []
    if waiting_for:
        # The cluster itself says the topic does not exist (with automatic creation off,
        # librdkafka waits topic.metadata.propagation.max.ms before naming any error):
        # the next producer is refused the same way, so this is never metadata_stale.
        age = cluster.metadata_age_seconds or 0.0
        ev["writes_rejected"] = [
            _refusal_evidence(ErrorObserved(UNKNOWN_TOPIC, t, producer.pending, age))
            for t in waiting_for[:10]
        ]
        reasons = tuple(_absent_reason(t, producer, age) for t in waiting_for)
        return Assessment(Verdict.WRITES_REJECTED, reasons, ev)
    if producer.java:
        # The Java client's reporter names refusals and throttles; its counters alone are
        # no proof of a hang (the client retries and expires batches by itself, and a
        # restart-class verdict needs the JVM's threads): Spark's view judges those.
        return Assessment(Verdict.HEALTHY, (), ev)
    # Brokers keep answering (responses grow, nothing awaits an answer) yet nothing is
    # delivered: the producer's requests are refused, its view of the cluster is wrong (S1).
    # A producer whose requests go unanswered (S2) awaits responses instead.
    answered = (
        producer.answered_age_seconds is not None
        and producer.answered_age_seconds <= thresholds.stall_seconds
        and producer.awaiting_responses == 0
    )
    if stalled and cluster_healthy and answered:
        ev["answered_age_seconds"] = round(producer.answered_age_seconds or 0.0, 3)
        return Assessment(
            Verdict.METADATA_STALE,
            (
                f"{producer.pending} messages pending for {producer.pending_seconds:.0f} s: "
                "brokers keep answering its requests but nothing is delivered (its view of the "
                "cluster is wrong) while every broker answers and every partition has a leader",
            ),
            ev,
        )
    if stalled and cluster_healthy:
        since = producer.progress_age_seconds
        return Assessment(
            Verdict.PRODUCER_HUNG,
            (
                f"{producer.pending} messages pending for {producer.pending_seconds:.0f} s and "
                + ("no delivery ever" if since is None else f"no delivery for {since:.0f} s")
                + f" (threshold {thresholds.stall_seconds:.0f} s) while every broker answers",
            ),
            ev,
        )
    return _assess_metadata(producer, cluster, thresholds, cluster_healthy, ev)


def refusals(
    producer: ProducerObservation,
    thresholds: Thresholds,
    absent: frozenset[str] = frozenset(),
) -> list[ErrorObserved]:
    """The refusals a restart cannot fix (`kafka_errors.Restart.MEETS_AGAIN`) that this
    producer still meets and that have held long enough to name. An unknown-topic error,
    which the code alone does not classify (the topic may be being created), is one when
    its topic is among `absent`: the cluster's own metadata does not have it either.

    Still met: seen within the stall threshold, or nothing delivered since the first one
    while messages wait. Held: since the stall threshold, or the producer has delivered
    nothing for it (its messages pending or its sends failing) - the same evidence the
    restart verdicts wait for, so a refusal is named no later than they would be."""
    window = max(thresholds.stall_seconds, thresholds.heartbeat_seconds)
    progress = producer.progress_age_seconds
    stuck = producer.failing_seconds > thresholds.stall_seconds or (
        producer.pending > 0
        and producer.pending_seconds > thresholds.stall_seconds
        and (progress is None or progress > thresholds.stall_seconds)
    )
    found = []
    for error in producer.errors:
        info = kafka_errors.by_name(error.code)
        confirmed = error.topic in absent and info is not None and info.name in UNKNOWN_TOPIC_NAMES
        if info is None or (info.restart is not kafka_errors.Restart.MEETS_AGAIN and not confirmed):
            continue
        first = error.first_age_seconds
        undelivered = producer.pending > 0 and (
            progress is None or (first is not None and progress >= first)
        )
        if error.last_age_seconds > window and not undelivered:
            continue
        if stuck or (first is not None and first >= thresholds.stall_seconds):
            found.append(error)
    split = producer.splits
    if stuck and split is not None and split.last_age_seconds <= window:
        # The Java client splits a batch only when the broker answers MESSAGE_TOO_LARGE,
        # and splits it to no less than its batch size: records above the topic's limit
        # are split again until `delivery.timeout.ms` expires them, so the failures name
        # a batch expiry, never the refusal (KAFKA-8350). Splits still growing while
        # nothing is delivered are the refusal.
        topics = sorted({e.topic for e in producer.errors if e.topic}) or sorted(producer.topics)
        found += [
            ErrorObserved(
                code=SPLIT_REFUSAL,
                topic=topic,
                count=split.count,
                last_age_seconds=split.last_age_seconds,
                first_age_seconds=split.first_age_seconds,
                first_ts=split.first_ts,
                source=SPLIT_SOURCE,
            )
            for topic in (topics[:10] or [""])
            if not any(e.topic == topic and e.code == SPLIT_REFUSAL for e in found)
        ]
    return found


SPLIT_REFUSAL = "MESSAGE_TOO_LARGE"
"""What a Java client's growing batch splits stand for (`kafka_errors`: meets again)."""
SPLIT_SOURCE = "batches the broker refused as too large, split by the Java client"


UNKNOWN_TOPIC_NAMES = frozenset({"UNKNOWN_TOPIC_OR_PARTITION", "_UNKNOWN_TOPIC"})
"""The error names (`kafka_errors`) a producer meets writing to a topic that does not exist."""


def absent_topics(producer: ProducerObservation, cluster: ClusterObservation) -> list[str]:
    """The producer's topics the cluster's metadata says do not exist, when that metadata
    was fetched after its messages began to wait (older metadata may predate a topic
    created since: it proves nothing about the wait)."""
    age = cluster.metadata_age_seconds
    if age is None or age >= producer.pending_seconds:
        return []
    return cluster.absent_for(producer.topics)


def _absent_reason(topic: str, producer: ProducerObservation, age: float) -> str:
    return (
        f"writes to topic {topic} refused: {UNKNOWN_TOPIC}, the cluster's metadata "
        f"({age:.0f} s old, fetched after the wait began) does not list the topic while "
        f"{producer.pending} messages have waited {producer.pending_seconds:.0f} s for it; "
        "the next producer meets the same refusal, a restart cannot help"
        + kafka_errors.hint_clause(kafka_errors.by_name("_UNKNOWN_TOPIC"))
    )


def _refusal_reason(error: ErrorObserved, absent: bool = False) -> str:
    info = kafka_errors.by_name(error.code)
    name = error.code if info is None or info.name == error.code else f"{error.code} ({info.name})"
    if absent:  # the code alone does not tell; the cluster's metadata does
        info = kafka_errors.by_name("_UNKNOWN_TOPIC")
    where = f"writes to topic {error.topic}" if error.topic else "the producer's connections"
    if absent:
        where += " (not in the cluster's metadata either)"
    since = ""
    if error.first_ts is not None:
        stamp = datetime.datetime.fromtimestamp(error.first_ts, datetime.UTC)
        since = f" since {stamp.strftime('%Y-%m-%dT%H:%M:%SZ')}"
    if error.first_age_seconds is not None:
        since += f" ({error.first_age_seconds:.0f} s ago)"
    times = f"{error.count} times" if not error.source else f"{error.count} {error.source}"
    return (
        f"{where} refused: {name}, {times}{since}, last {error.last_age_seconds:.0f} "
        "s ago; the next producer meets the same refusal, a restart cannot help"
        + kafka_errors.hint_clause(info)
    )


def _refusal_evidence(error: ErrorObserved) -> dict[str, Any]:
    return {
        "topic": error.topic or None,
        "error": error.code,
        "count": error.count,
        "first_ts": error.first_ts,
        "last_age_seconds": round(error.last_age_seconds, 1),
    }


def _assess_metadata(
    producer: ProducerObservation,
    cluster: ClusterObservation,
    thresholds: Thresholds,
    cluster_healthy: bool,
    ev: dict[str, Any],
) -> Assessment:
    reasons = []
    disagreements = leader_disagreements(producer, cluster)
    if disagreements:
        ev["leader_disagreements"] = disagreements[:20]
        ev["disagreeing_seconds"] = round(producer.disagreeing_seconds, 1)
    if producer.metadata_age_seconds is not None:
        ev["metadata_age_seconds"] = round(producer.metadata_age_seconds, 1)
    grace = thresholds.election_grace_seconds
    if (
        disagreements
        and producer.pending > 0
        and producer.disagreeing_seconds > grace
        and producer.metadata_age_seconds is not None
        and producer.metadata_age_seconds > grace
    ):
        # Leaders moved longer than an election ago and the producer, with messages to
        # send, has not refreshed since. Both clocks count: its metadata's age alone is no
        # proof (a producer that last refreshed 9 s before an election has 9 s old metadata
        # the moment leaders move; on Apache Kafka that was called stale while the producer
        # recovered), nor is the disagreement's age alone (the sidecar's own metadata may be
        # the old one: it is fetched again when a disagreement starts). An idle producer's
        # cached leaders are no fault: its next send is answered NOT_LEADER and refreshes
        # them, or its periodic refresh does (a task paused through an election was
        # restarted for this in the false-restart soak); if its sends then keep failing,
        # `failing_seconds` below says so.
        reasons.append(
            f"producer's leaders have disagreed with the cluster's on {len(disagreements)} "
            f"partitions for {producer.disagreeing_seconds:.0f} s (election grace "
            f"{grace:.0f} s) and its metadata is {producer.metadata_age_seconds:.0f} s old"
        )
    elif (
        producer.metadata_age_seconds is not None
        and producer.metadata_age_seconds > thresholds.metadata_max_age_seconds
    ):
        reasons.append(
            f"producer's metadata is {producer.metadata_age_seconds:.0f} s old "
            f"(allowed {thresholds.metadata_max_age_seconds:.0f} s)"
        )
    if cluster_healthy and producer.failing_seconds > thresholds.stall_seconds:
        reasons.append(
            f"sends have failed for {producer.failing_seconds:.0f} s with no delivery "
            "while every broker answers and every partition has a leader"
        )
    if reasons:
        return Assessment(Verdict.METADATA_STALE, tuple(reasons), ev)
    if (
        not cluster_healthy
        and producer.pending > 0
        and producer.pending_seconds > thresholds.stall_seconds
    ):
        return Assessment(
            Verdict.BROKER_DEGRADED,
            ("producer is stalled while some brokers fail: not a producer fault",),
            ev,
        )
    return Assessment(Verdict.HEALTHY, (), ev)


_PRODUCER_ORDER = (
    Verdict.WRITES_REJECTED,
    Verdict.PRODUCER_HUNG,
    Verdict.METADATA_STALE,
    Verdict.PRODUCER_SILENT,
    Verdict.BROKER_DEGRADED,
)


@dataclass(frozen=True)
class RoundEvidence:
    """Everything one round observed: what `evaluate` judges."""

    cluster: ClusterObservation | None
    """None until a probe round has completed."""
    producers: Sequence[ProducerObservation] = ()
    """The wrapper's telemetry, one per producer."""
    leaderless_since: float | None = None
    """When leaderless partitions were first seen."""
    topics: frozenset[str] = frozenset()
    """The topics the sidecar was told the pod writes (besides the producers' own)."""
    sockets: SocketObservation | None = None
    """This round's view of the pod's own connections to brokers (None: not read)."""
    spark: SparkView | None = None
    """Spark's view of this executor this round (None: the Spark view is off)."""
    spark_task_running: bool | None = None
    """True: one of this executor's tasks runs; False: none; None: unknown. Combined with
    the socket view's silence; by default it comes from `spark`."""
    stacks: HeldView | None = None
    """The newest sample of the executor's Python stacks (None: not sampled)."""

    @property
    def task_running(self) -> bool | None:
        if self.spark_task_running is None and self.spark is not None:
            return self.spark.task_running  # None while the view is unavailable
        return self.spark_task_running


def evaluate(evidence: RoundEvidence, *, thresholds: Thresholds, now: float) -> PodAssessment:
    """The pod's verdict now: the first rule of the module's order that judges."""
    cluster = evidence.cluster
    if cluster is None:
        return PodAssessment(Assessment(Verdict.UNKNOWN, ("no probe round has completed yet",)), {})
    brokers = _brokers_evidence(cluster)
    if not cluster.answering:
        return _unreachable(evidence, cluster, brokers, thresholds)
    if election := _election(evidence, cluster, brokers, thresholds, now):
        return election
    # Dead bootstrap entries the cluster does not advertise (S1) are a configuration
    # smell, not a cluster problem: judge producers by the brokers that are members.
    members_failing = [b for b in cluster.failing if b.advertised]
    cluster_healthy = not members_failing and cluster.metadata_ok
    per_producer = {
        p.key: assess_producer(p, cluster, thresholds, cluster_healthy) for p in evidence.producers
    }
    found = _findings(evidence, cluster, thresholds, cluster_healthy)
    return _producer_verdict(evidence, cluster, brokers, per_producer, found) or _quiet(
        evidence, brokers, per_producer, found
    )


def _unreachable(
    evidence: RoundEvidence,
    cluster: ClusterObservation,
    brokers: dict[str, Any],
    thresholds: Thresholds,
) -> PodAssessment:
    """Rule 2: no broker answers from this pod."""
    failing = ", ".join(f"{b.address} {b.reachability}" for b in cluster.brokers)
    seen = judge_sockets(
        evidence.sockets,
        stall_seconds=thresholds.stall_seconds,
        request_timeout_seconds=thresholds.producer_request_timeout_seconds,
        cluster_healthy=False,
    )
    pod = Assessment(
        Verdict.CLUSTER_UNREACHABLE,
        (
            f"no broker answers from this pod: {failing or 'no brokers configured'}",
            *(f.reason for f in seen if f.verdict is Verdict.BROKER_DEGRADED),
        ),
        _with_sockets({"brokers": brokers}, evidence.sockets),
    )
    return PodAssessment(pod, {p.key: pod for p in evidence.producers})


def _election(
    evidence: RoundEvidence,
    cluster: ClusterObservation,
    brokers: dict[str, Any],
    thresholds: Thresholds,
    now: float,
) -> PodAssessment | None:
    """Rule 3: partitions the producers write to have no leader."""
    producers, topics = evidence.producers, evidence.topics
    written = topics.union(*(p.topics for p in producers)) if producers else topics
    leaderless = cluster.leaderless_for(frozenset(written))
    if not leaderless:
        return None
    since = evidence.leaderless_since
    held = 0.0 if since is None else now - since
    within = held <= thresholds.election_grace_seconds
    pod = Assessment(
        Verdict.LEADER_ELECTION,
        (
            f"{len(leaderless)} partitions without a leader for {held:.1f} s "
            + (
                "(within grace: expected during an election)"
                if within
                else f"(beyond the {thresholds.election_grace_seconds:.0f} s grace)"
            ),
        ),
        {
            "leaderless": leaderless[:50],
            "leaderless_seconds": round(held, 3),
            "brokers": brokers,
        },
    )
    return PodAssessment(pod, {p.key: pod for p in producers})


def _producer_verdict(
    evidence: RoundEvidence,
    cluster: ClusterObservation,
    brokers: dict[str, Any],
    per_producer: dict[str, Assessment],
    found: _Findings,
) -> PodAssessment | None:
    """Rules 4-8: the first verdict of `_PRODUCER_ORDER` that a producer's telemetry, a
    view's finding or the evidence ladder gives, with every source's reasons."""
    sockets, spark = evidence.sockets, evidence.spark
    socket_findings, spark_findings, stack_findings, silence, weighed = found
    also = [f"{_label(spark)}: {f.reason}" for f in spark_findings if f.verdict is None]
    also += [f.reason for f in stack_findings if f.verdict is None and not f.clears_silence]
    for verdict in _PRODUCER_ORDER:
        hit = [(k, a) for k, a in per_producer.items() if a.verdict is verdict]
        seen = [f for f in socket_findings if f.verdict is verdict]
        judged = [f for f in spark_findings if f.verdict is verdict]
        ladder = weighed if weighed is not None and weighed.verdict is verdict else None
        stacked = [f for f in stack_findings if f.verdict is verdict and ladder is None]
        reasons = [f"producer {k}: {r}" for k, a in hit for r in a.reasons]
        if verdict is Verdict.BROKER_DEGRADED and (hit or seen or judged or cluster.failing):
            reasons += [_broker_reason(b) for b in cluster.failing]
            refusing = [b.address for b in cluster.failing if b.reachability == "refused"]
            if corroboration := failed_connects_reason(sockets, refusing):
                reasons.append(f"socket view: {corroboration}")
        if not (hit or seen or judged or stacked or ladder or reasons):
            continue
        reasons += [f"socket view: {f.reason}" for f in seen]
        reasons += [f.reason for f in stacked]
        reasons += list(ladder.reasons) if ladder else []
        reasons += [f"{_label(spark)}: {f.reason}" for f in judged] + also
        shown: dict[str, Any] = {"producers": [k for k, _ in hit], "brokers": brokers}
        named = [c for f in seen for c in f.connections]
        named += list(silence.connections) if ladder and silence else []
        if named:
            shown["connections_judged"] = sorted(set(named))[:MAX_CONNECTIONS_SHOWN]
        shown |= _spark_evidence(judged + [f for f in spark_findings if f.verdict is None])
        shown |= _stack_evidence(stacked, ladder)
        return PodAssessment(
            Assessment(
                verdict,
                tuple(reasons),
                _with_sockets(shown, sockets),
                held=bool(ladder and silence and silence.past_write_interval),
            ),
            per_producer,
        )
    return None


def _quiet(
    evidence: RoundEvidence,
    brokers: dict[str, Any],
    per_producer: dict[str, Assessment],
    found: _Findings,
) -> PodAssessment:
    """Rules 9-10: nothing to judge (`unknown`), else `healthy`."""
    sockets, spark = evidence.sockets, evidence.spark
    connected = sockets is not None and sockets.available and bool(sockets.connections)
    jvm_producer = spark is not None and spark.producer_visible
    if not evidence.producers and not connected and not jvm_producer:
        return PodAssessment(
            Assessment(
                Verdict.UNKNOWN,
                (_nothing_to_judge(sockets, spark),),
                _with_sockets({"brokers": brokers}, sockets),
            ),
            per_producer,
        )
    healthy: dict[str, Any] = {"brokers": brokers}
    if found.weighed is not None:  # silence cleared by a source showing the task busy elsewhere
        healthy["silence_cleared"] = list(found.weighed.reasons)
    return PodAssessment(
        Assessment(Verdict.HEALTHY, (), _with_sockets(healthy, sockets)), per_producer
    )


class _Findings(NamedTuple):
    """Each view's findings of one round (`_findings`)."""

    sockets: tuple[SocketFinding, ...]
    """The socket view's, without the silence finding."""
    spark: tuple[SparkFinding, ...]
    stacks: tuple[StackFinding, ...]
    silence: SocketFinding | None
    """The socket view's every-connection silence, if it found one."""
    weighed: SilenceWeighed | None
    """What the evidence ladder made of that silence."""


def _findings(
    evidence: RoundEvidence,
    cluster: ClusterObservation,
    thresholds: Thresholds,
    cluster_healthy: bool,
) -> _Findings:
    """Each view's findings, the silence finding (taken out of the socket findings) and
    what the evidence ladder made of it."""
    producers, sockets, spark = evidence.producers, evidence.sockets, evidence.spark
    socket_findings = judge_sockets(
        sockets,
        stall_seconds=thresholds.stall_seconds,
        request_timeout_seconds=thresholds.producer_request_timeout_seconds,
        cluster_healthy=cluster_healthy,
        spark_task_running=evidence.task_running,
        failing_brokers=frozenset(b.address for b in cluster.failing),
        write_interval_seconds=thresholds.expected_write_interval_seconds,
        throttle_seconds=max(
            (p.throttle_seconds for p in producers if p.throttled(thresholds.stall_seconds)),
            default=None,
        ),
    )
    spark_findings = judge_spark(
        spark,
        stall_seconds=thresholds.stall_seconds,
        heartbeat_seconds=thresholds.heartbeat_seconds,
        cluster_healthy=cluster_healthy,
        absent_topics=tuple(cluster.absent_for(evidence.topics)),
    )
    stack_findings = judge_stacks(
        evidence.stacks,
        heartbeat_seconds=thresholds.heartbeat_seconds,
        stall_seconds=thresholds.stall_seconds,
        silent_seconds=sockets.silent_seconds if sockets and sockets.available else None,
        cluster_healthy=cluster_healthy,
    )
    silence = next((f for f in socket_findings if f.verdict is Verdict.PRODUCER_SILENT), None)
    weighed = (
        weigh_silence(
            silence.reason,
            producers=producers,
            stacks=stack_findings,
            spark=spark,
            stall_seconds=thresholds.stall_seconds,
            heartbeat_seconds=thresholds.heartbeat_seconds,
        )
        if silence is not None
        else None
    )
    others = tuple(f for f in socket_findings if f is not silence)
    return _Findings(others, spark_findings, stack_findings, silence, weighed)


def _label(spark: SparkView | None) -> str:
    return spark.label if spark is not None else "spark view"


def _stack_evidence(stacked: list[StackFinding], ladder: SilenceWeighed | None) -> dict[str, Any]:
    """The threads the Python stack view and the ladder name."""
    threads = {t for f in stacked for t in f.threads} | set(ladder.threads if ladder else ())
    return {"threads_judged": sorted(threads)} if threads else {}


def _with_sockets(evidence: dict[str, Any], sockets: SocketObservation | None) -> dict[str, Any]:
    if sockets is not None:
        evidence["sockets"] = sockets.summary(MAX_CONNECTIONS_SHOWN)
    return evidence


def _spark_evidence(findings: list[SparkFinding]) -> dict[str, Any]:
    """The threads and tasks Spark findings name (the view itself is in /status `spark`)."""
    threads = sorted({t for f in findings for t in f.threads})
    tasks = sorted({t for f in findings for t in f.tasks})
    return {k: v for k, v in (("spark_threads", threads), ("spark_tasks", tasks)) if v}


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


def _broker_reason(broker: Any) -> str:
    never_a_broker = broker.node_id is None and not broker.advertised
    where = "bootstrap entry" if broker.in_bootstrap and never_a_broker else "broker"
    node = f" (node {broker.node_id})" if broker.node_id is not None else ""
    if broker.node_id is not None and not broker.advertised:
        node = f" (node {broker.node_id}, gone from the cluster's metadata)"
    detail = f": {broker.detail}" if broker.detail else ""
    return f"{where} {broker.address}{node} is {broker.reachability}{detail}"


HELD_BY_THRESHOLD = frozenset(
    {Verdict.PRODUCER_HUNG, Verdict.METADATA_STALE, Verdict.WRITES_REJECTED}
)
"""Verdicts whose evidence already had to hold for a threshold (stall, heartbeat, failing
time): they take over at once instead of after `hold` more evaluations (a refusal must
replace a restart verdict in the same evaluation)."""
HELD_WHEN_MEASURED = frozenset({Verdict.PRODUCER_SILENT})
"""Alert-only verdicts that take over at once when their assessment says its evidence
held for a threshold of its own (`Assessment.held`): silence past a declared write
interval has lasted the whole interval, a second evaluation would only add a probe
round to the alert. Silence while Spark runs a task keeps the hysteresis (a task that
just started after an idle gap meets silence that is the gap's), and no restart verdict
is taken at once because of this."""


@dataclass
class Debouncer:
    """Hysteresis: a new verdict takes over only after `hold` evaluations in a row
    (at once for verdicts in `HELD_BY_THRESHOLD`, and for those in `HELD_WHEN_MEASURED`
    whose assessment is `held`)."""

    hold: int = 2
    current: Verdict = Verdict.UNKNOWN
    since: float | None = None
    _candidate: Verdict | None = None
    _count: int = 0

    def update(self, verdict: Verdict, now: float, *, held: bool = False) -> bool:
        """Feed one evaluation (`held`: its `Assessment.held`); True when the current
        verdict changed."""
        if verdict is self.current:
            self._candidate, self._count = None, 0
            if self.since is None:
                self.since = now
            return False
        if verdict is self._candidate:
            self._count += 1
        else:
            self._candidate, self._count = verdict, 1
        at_once = verdict in HELD_BY_THRESHOLD or (held and verdict in HELD_WHEN_MEASURED)
        if self._count >= self.hold or at_once:
            self.current, self.since = verdict, now
            self._candidate, self._count = None, 0
            return True
        return False
