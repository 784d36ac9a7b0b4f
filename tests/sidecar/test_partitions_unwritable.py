"""The cluster's refusal of written partitions is `partitions_unwritable`, never a restart.

Pure (the rule table, `hangwatch_sidecar.rules`), on issue 43's case as evidence: topic
`t` with three replicas and `min.insync.replicas` 3, broker 3 out of every ISR. Covers:

- the wrapper stuck in it (its requests answered, nothing delivered: what was
  `metadata_stale`, a restart) -> `partitions_unwritable` for the pod and the producer,
  naming the topic, the partitions, the ISR against min.insync.replicas and the broker
  out of the ISR (its address and probe class), with the topics in the evidence;
- a plain producer (no telemetry: the sidecar's topics) and a Spark sink's pod alike;
  with every ISR full the same pod is `healthy` (the control);
- a producer whose telemetry says acks=1 is not held to min.insync.replicas (its
  restart verdicts stay); a leader whose log directory failed (`KAFKA_STORAGE_ERROR`)
  refuses every producer; a producer that reports NOT_ENOUGH_REPLICAS names it, and a
  failed task attempt naming NotEnoughReplicasException too;
- a producer whose heartbeat stopped (S4) stays `producer_hung`; leaderless partitions
  stay `leader_election`;
- min.insync.replicas unknown: an under-replicated written partition holds a restart
  verdict back (`partitions_unwritable`, "the cluster may refuse"), and is no verdict at
  all while the producers deliver;
- the first stall threshold after the refusal ends, a producer that delivered nothing
  since keeps `partitions_unwritable`; one that delivers is `healthy`; past it, a
  producer stuck while the cluster accepts is judged as any other.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from hangwatch.acceptance import MIN_INSYNC_FROM_TOPIC, MinInsync
from hangwatch.contracts import Reachability as R
from hangwatch.contracts import Verdict as V
from hangwatch.wire.status import UNWRITABLE_TOPICS
from hangwatch_sidecar.assessment import Thresholds
from hangwatch_sidecar.evidence import ClusterObservation, ErrorObserved
from hangwatch_sidecar.pod_rules import GRACE_KEY
from hangwatch_sidecar.probe.types import PartitionState
from hangwatch_sidecar.round import RefusalSeen, RoundEvidence
from hangwatch_sidecar.rules import evaluate
from hangwatch_sidecar.spark.types import FailedAttempt, SparkView
from tests.sidecar.builders import cluster, producer

T = Thresholds(stall_seconds=10, heartbeat_seconds=10, election_grace_seconds=15)
NOW = 100.0
ANSWERED_STUCK = {
    "pending": 218,
    "pending_seconds": 14,
    "progress_age_seconds": 14,
    "answered_age_seconds": 0.5,
}
"""The wrapper in issue 43's case: requests answered, nothing delivered for 14 s (what
the answered_not_delivered rule calls metadata_stale)."""
SHRUNK = (1, 2)
FULL = (1, 2, 3)


OWN = MinInsync(3, MIN_INSYNC_FROM_TOPIC)


def isr_case(
    isr: tuple[int, ...] = SHRUNK,
    min_insync: MinInsync | None = OWN,
    **partition: Any,
) -> ClusterObservation:
    """Topic `t` (3 partitions, 3 replicas), `isr` in every partition; while the ISR
    lacks broker 3, broker 3 is stopped (refused, gone from the metadata: not a member,
    so the cluster counts as healthy), else every broker answers."""
    down = 3 not in isr
    base = cluster(R.OK, R.OK, R.REFUSED if down else R.OK)
    brokers = tuple(replace(b, advertised=not (down and b.node_id == 3)) for b in base.brokers)
    parts = tuple(PartitionState(p, 1, FULL, isr, partition.get("error")) for p in range(3))
    return replace(
        base,
        brokers=brokers,
        partitions={"t": parts},
        min_insync={} if min_insync is None else {"t": min_insync},
    )


def judge(evidence: RoundEvidence, now: float = NOW) -> Any:
    return evaluate(evidence, thresholds=T, now=now)


def test_the_wrapper_in_the_isr_case_is_the_clusters_refusal_not_a_restart() -> None:
    before = judge(RoundEvidence(isr_case(FULL), [producer(**ANSWERED_STUCK)]))
    assert before.pod.verdict is V.METADATA_STALE  # what the cluster's state explains
    found = judge(RoundEvidence(isr_case(), [producer(**ANSWERED_STUCK)]))
    assert found.pod.verdict is V.PARTITIONS_UNWRITABLE
    assert found.producers["producer-42-1"].verdict is V.PARTITIONS_UNWRITABLE
    assert found.pod.reasons == (
        "topic t: partitions 0, 1, 2 refuse acks=all writes: ISR 2 of 3 replicas, below "
        "min.insync.replicas 3 (the topic's own); out of the ISR: broker 3 (10.0.0.3:9092: "
        "refused)",
    )
    assert found.pod.evidence[UNWRITABLE_TOPICS] == [
        {"topic": "t", "partitions": [0, 1, 2], "reason": found.pod.reasons[0]}
    ]


def test_without_telemetry_the_sidecars_topics_are_judged_and_a_full_isr_is_healthy() -> None:
    plain = judge(RoundEvidence(isr_case(), [], topics=frozenset({"t"})))
    assert plain.pod.verdict is V.PARTITIONS_UNWRITABLE
    idle = producer(pending=0)
    assert judge(RoundEvidence(isr_case(FULL), [idle], topics=frozenset({"t"}))).pod.verdict is (
        V.HEALTHY
    )
    other = judge(RoundEvidence(isr_case(), [], topics=frozenset({"u"})))
    assert other.pod.verdict is not V.PARTITIONS_UNWRITABLE  # not a topic the pod writes


def test_acks_one_is_not_held_and_a_failed_log_directory_refuses_everyone() -> None:
    acks_one = producer(**ANSWERED_STUCK, acks=1)
    assert judge(RoundEvidence(isr_case(), [acks_one])).pod.verdict is V.METADATA_STALE
    storage = isr_case(FULL, error="KAFKA_STORAGE_ERROR")
    found = judge(RoundEvidence(storage, [acks_one]))
    assert found.pod.verdict is V.PARTITIONS_UNWRITABLE
    assert "KAFKA_STORAGE_ERROR" in found.pod.reasons[0]


def test_refusals_the_producers_report_are_named() -> None:
    met = ErrorObserved("NOT_ENOUGH_REPLICAS", "t", 40, last_age_seconds=2.0)
    found = judge(RoundEvidence(isr_case(FULL, None), [producer(**ANSWERED_STUCK, errors=(met,))]))
    assert found.pod.verdict is V.PARTITIONS_UNWRITABLE
    assert "meets NOT_ENOUGH_REPLICAS on topic t (40 times" in found.pod.reasons[0]
    old = replace(met, last_age_seconds=60.0)
    stale = judge(RoundEvidence(isr_case(FULL), [producer(**ANSWERED_STUCK, errors=(old,))]))
    assert stale.pod.verdict is V.METADATA_STALE  # long gone: not current
    attempt = FailedAttempt(
        7, 1, 0, 0, 0, "org.apache.kafka.common.errors.NotEnoughReplicasException: Messages "
        "are rejected since there are fewer in-sync replicas than required.", seen_at=99.0,
    )  # fmt: skip
    spark = SparkView(at=NOW, available=True, failed_attempts=(attempt,), executor_id="1")
    found = judge(RoundEvidence(isr_case(FULL), [], topics=frozenset({"t"}), spark=spark))
    assert found.pod.verdict is V.PARTITIONS_UNWRITABLE
    assert "NotEnoughReplicasException (NOT_ENOUGH_REPLICAS)" in found.pod.reasons[0]


def test_a_stopped_heartbeat_stays_hung_and_a_leaderless_partition_the_elections() -> None:
    blocked = producer(pending=50, heartbeat_age_seconds=30.0, alive=True)
    assert judge(RoundEvidence(isr_case(), [blocked])).pod.verdict is V.PRODUCER_HUNG
    electing = replace(isr_case(), leaderless_topics=frozenset({"t"}))
    assert judge(RoundEvidence(electing, [producer(**ANSWERED_STUCK)])).pod.verdict is (
        V.LEADER_ELECTION
    )


def test_an_unknown_min_insync_holds_a_restart_back_and_is_no_alert_by_itself() -> None:
    why = "DescribeConfigs refused: the principal lacks the DESCRIBE_CONFIGS ACL on the topic"
    unknown = isr_case(min_insync=MinInsync(None, problem=why))
    held = judge(RoundEvidence(unknown, [producer(**ANSWERED_STUCK)]))
    assert held.pod.verdict is V.PARTITIONS_UNWRITABLE
    assert why in held.pod.reasons[0] and "may refuse acks=all writes" in held.pod.reasons[0]
    delivering = producer(pending=3, pending_seconds=0.5, progress_age_seconds=0.2)
    # no alert of its own: the broker down is what the pod says while its producer delivers
    assert judge(RoundEvidence(unknown, [delivering])).pod.verdict is V.BROKER_DEGRADED


def test_one_stall_threshold_after_the_refusal_a_restart_verdict_is_still_held() -> None:
    seen = RefusalSeen(NOW - 4.0, ("topic t: partitions 0, 1, 2 refuse acks=all writes",),
                       ({"topic": "t", "partitions": [0, 1, 2], "reason": "r"},))  # fmt: skip
    back = RoundEvidence(isr_case(FULL), [producer(**ANSWERED_STUCK)], refusal=seen)  # all up
    found = judge(back)
    assert found.pod.verdict is V.PARTITIONS_UNWRITABLE
    assert found.pod.evidence[GRACE_KEY] == 4.0 and "until 4 s ago" in found.pod.reasons[0]
    assert found.pod.evidence[UNWRITABLE_TOPICS] == [seen.topics[0]]
    delivering = producer(pending=3, pending_seconds=0.5, progress_age_seconds=0.2)
    assert judge(replace(back, producers=[delivering])).pod.verdict is V.HEALTHY
    later = judge(back, now=NOW + T.stall_seconds)
    assert later.pod.verdict is V.METADATA_STALE  # stuck a stall threshold past it: its own
