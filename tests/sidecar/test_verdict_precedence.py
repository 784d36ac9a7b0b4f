"""The verdict engine decides each seed failure correctly and never blames a producer
for a cluster problem.

Covers: no probe yet -> unknown; S0 every broker blackholed -> cluster_unreachable
naming the classes; S2 leaderless partitions of written topics -> leader_election
(within and beyond grace), leaderless partitions of other topics ignored, and a
pending producer during an election is never producer_hung; S2 stuck after leaders
are back -> producer_hung; S4 heartbeat stopped while alive with pending messages ->
producer_hung, but not when liveness is unknown or the process exited; a stalled
producer while a broker times out -> broker_degraded, never producer_hung; S1 sends
failing while the cluster is healthy, or leader disagreement with old metadata ->
metadata_stale; S3 one blackholed and one refused broker -> broker_degraded naming
`timeout` and `refused`; a broker gone from the metadata is named by its last node
id, a never-advertised address as a bootstrap entry; no telemetry -> unknown with a
reason; healthy otherwise.
"""

from __future__ import annotations

from dataclasses import replace

from hangwatch.contracts import Reachability as R
from hangwatch.contracts import Verdict as V
from hangwatch_sidecar.evidence import BrokerObservation
from hangwatch_sidecar.verdicts import Thresholds, evaluate
from tests.sidecar.builders import cluster, producer

T = Thresholds(
    stall_seconds=30, heartbeat_seconds=15, metadata_max_age_seconds=60, election_grace_seconds=15
)


def test_no_probe_yet_is_unknown() -> None:
    result = evaluate(None, [producer()], thresholds=T, now=0)
    assert result.pod.verdict is V.UNKNOWN
    assert "no probe" in result.pod.reasons[0]


def test_s0_every_broker_blackholed_is_cluster_unreachable() -> None:
    result = evaluate(
        cluster(R.TIMEOUT, R.TIMEOUT, R.TIMEOUT),
        [producer(pending=50, pending_seconds=300, progress_age_seconds=300)],
        thresholds=T,
        now=100,
    )
    assert result.pod.verdict is V.CLUSTER_UNREACHABLE
    assert "timeout" in result.pod.reasons[0]
    assert result.producers["producer-42-1"].verdict is V.CLUSTER_UNREACHABLE


def test_s2_election_within_grace_is_leader_election_not_hung() -> None:
    stuck = producer(pending=100, pending_seconds=60, progress_age_seconds=60)
    result = evaluate(
        cluster(leaderless_topics=frozenset({"t"})),
        [stuck],
        thresholds=T,
        now=102,
        leaderless_since=100.5,
    )
    assert result.pod.verdict is V.LEADER_ELECTION
    assert "within grace" in result.pod.reasons[0]
    assert result.pod.evidence["leaderless"] == ["t/*"]


def test_election_beyond_grace_still_blocks_producer_hung() -> None:
    stuck = producer(pending=100, pending_seconds=600, progress_age_seconds=600)
    result = evaluate(
        cluster(leaderless=frozenset({("t", 1)})),
        [stuck],
        thresholds=T,
        now=200,
        leaderless_since=100,
    )
    assert result.pod.verdict is V.LEADER_ELECTION
    assert "beyond" in result.pod.reasons[0]


def test_leaderless_partitions_of_other_topics_are_ignored() -> None:
    result = evaluate(
        cluster(leaderless_topics=frozenset({"other"})),
        [producer()],
        thresholds=T,
        now=100,
        leaderless_since=90,
    )
    assert result.pod.verdict is V.HEALTHY


def test_s2_stuck_after_leaders_are_back_is_producer_hung() -> None:
    stuck = producer(pending=100, pending_seconds=31, progress_age_seconds=45)
    result = evaluate(cluster(), [stuck], thresholds=T, now=100)
    assert result.pod.verdict is V.PRODUCER_HUNG
    assert "100 messages pending" in result.pod.reasons[0]
    assert result.pod.evidence["producers"] == ["producer-42-1"]


def test_pending_but_recently_delivering_is_healthy() -> None:
    busy = producer(pending=5000, pending_seconds=600, progress_age_seconds=0.2)
    assert evaluate(cluster(), [busy], thresholds=T, now=100).pod.verdict is V.HEALTHY


def test_s4_heartbeat_stopped_while_alive_is_producer_hung() -> None:
    blocked = producer(
        pending=10, heartbeat_age_seconds=16, pending_seconds=16, progress_age_seconds=16
    )
    result = evaluate(cluster(), [blocked], thresholds=T, now=100)
    assert result.pod.verdict is V.PRODUCER_HUNG
    assert "heartbeat stopped" in result.pod.reasons[0]


def test_stale_heartbeat_without_known_liveness_or_after_exit_is_not_hung() -> None:
    unknown = producer(alive=None, pending=10, heartbeat_age_seconds=100, pending_seconds=5)
    exited = producer(alive=False, pending=10, heartbeat_age_seconds=100, pending_seconds=5)
    assert evaluate(cluster(), [unknown], thresholds=T, now=100).pod.verdict is V.HEALTHY
    result = evaluate(cluster(), [exited], thresholds=T, now=100)
    assert result.producers["producer-42-1"].verdict is V.UNKNOWN


def test_stalled_during_broker_failure_is_broker_degraded_never_hung() -> None:
    stuck = producer(pending=100, pending_seconds=90, progress_age_seconds=90)
    result = evaluate(cluster(R.OK, R.TIMEOUT, R.OK), [stuck], thresholds=T, now=100)
    assert result.pod.verdict is V.BROKER_DEGRADED


def test_s1_failing_while_cluster_healthy_is_metadata_stale() -> None:
    failing = producer(failed_total=500, failing_seconds=40, progress_age_seconds=40)
    result = evaluate(cluster(), [failing], thresholds=T, now=100)
    assert result.pod.verdict is V.METADATA_STALE
    assert "failed for 40 s" in result.pod.reasons[0]


def test_s1_leader_disagreement_with_old_metadata_is_metadata_stale() -> None:
    stale = producer(leaders={("t", 0): 3, ("t", 1): 2, ("t", 2): 3}, metadata_age_seconds=90)
    result = evaluate(cluster(), [stale], thresholds=T, now=100)
    assert result.pod.verdict is V.METADATA_STALE
    assert result.producers["producer-42-1"].evidence["leader_disagreements"] == [
        "t/0: producer says 3, cluster says 1"
    ]
    fresh = producer(leaders={("t", 0): 3}, metadata_age_seconds=5)  # within election grace
    assert evaluate(cluster(), [fresh], thresholds=T, now=100).pod.verdict is V.HEALTHY


def test_s3_blackholed_and_refused_brokers_are_named_with_their_class() -> None:
    result = evaluate(cluster(R.OK, R.TIMEOUT, R.REFUSED), [producer()], thresholds=T, now=100)
    assert result.pod.verdict is V.BROKER_DEGRADED
    assert result.pod.reasons == (
        "broker 10.0.0.2:9092 (node 2) is timeout",
        "broker 10.0.0.3:9092 (node 3) is refused",
    )
    assert result.pod.evidence["brokers"]["10.0.0.2:9092"]["reachability"] == "timeout"


def test_no_telemetry_yet_is_unknown_with_a_reason() -> None:
    result = evaluate(cluster(), [], thresholds=T, now=100)
    assert result.pod.verdict is V.UNKNOWN
    assert "no producer telemetry" in result.pod.reasons[0]


def test_unusable_telemetry_is_unknown_for_that_producer_only() -> None:
    bad = producer(key="producer-7-1", problem="telemetry is not valid JSON")
    result = evaluate(cluster(), [producer(), bad], thresholds=T, now=100)
    assert result.pod.verdict is V.HEALTHY
    assert result.producers["producer-7-1"].verdict is V.UNKNOWN
    assert result.producers["producer-7-1"].reasons == ("telemetry is not valid JSON",)


def test_hung_outranks_stale_and_degraded_across_producers() -> None:
    hung = producer(key="a", pending=10, pending_seconds=40, progress_age_seconds=40)
    stale = producer(key="b", failed_total=9, failing_seconds=40)
    result = evaluate(cluster(), [stale, hung], thresholds=T, now=100)
    assert result.pod.verdict is V.PRODUCER_HUNG
    assert result.producers["b"].verdict is V.METADATA_STALE


def test_s1_dead_bootstrap_entries_do_not_excuse_a_failing_producer() -> None:
    base = cluster()
    dead = BrokerObservation(
        address="10.0.0.9:9092", reachability=R.REFUSED, in_bootstrap=True, advertised=False
    )
    with_dead = replace(base, brokers=(*base.brokers, dead))
    failing = producer(failed_total=500, failing_seconds=40, progress_age_seconds=40)
    result = evaluate(with_dead, [failing], thresholds=T, now=100)
    assert result.pod.verdict is V.METADATA_STALE
    healthy = evaluate(with_dead, [producer()], thresholds=T, now=100)
    assert healthy.pod.verdict is V.BROKER_DEGRADED
    assert healthy.pod.reasons == ("bootstrap entry 10.0.0.9:9092 is refused",)


def test_a_broker_gone_from_metadata_keeps_its_name() -> None:
    base = cluster()
    gone = BrokerObservation(
        address="10.0.0.2:9092",
        reachability=R.REFUSED,
        node_id=2,
        in_bootstrap=True,
        advertised=False,
    )
    result = evaluate(
        replace(base, brokers=(*base.brokers, gone)), [producer()], thresholds=T, now=100
    )
    assert result.pod.verdict is V.BROKER_DEGRADED
    assert result.pod.reasons == (
        "broker 10.0.0.2:9092 (node 2, gone from the cluster's metadata) is refused",
    )


def test_s1_stuck_but_answered_is_metadata_stale_not_hung() -> None:
    answered = producer(
        pending=100,
        pending_seconds=31,
        progress_age_seconds=45,
        answered_age_seconds=0.5,
        awaiting_responses=0,
    )
    result = evaluate(cluster(), [answered], thresholds=T, now=100)
    assert result.pod.verdict is V.METADATA_STALE
    assert "keep answering" in result.pod.reasons[0]


def test_s2_stuck_with_unanswered_requests_is_hung_even_if_other_answers_came() -> None:
    waiting = producer(
        pending=100,
        pending_seconds=31,
        progress_age_seconds=45,
        answered_age_seconds=0.5,
        awaiting_responses=3,
    )
    assert evaluate(cluster(), [waiting], thresholds=T, now=100).pod.verdict is V.PRODUCER_HUNG


def test_s4_heartbeat_stopped_counts_even_if_last_snapshot_had_nothing_pending() -> None:
    blocked = producer(pending=0, heartbeat_age_seconds=16)
    result = evaluate(cluster(), [blocked], thresholds=T, now=100)
    assert result.pod.verdict is V.PRODUCER_HUNG


def test_metadata_older_than_allowed_is_stale_but_normal_refresh_age_is_not() -> None:
    assert (
        evaluate(cluster(), [producer(metadata_age_seconds=59)], thresholds=T, now=100).pod.verdict
        is V.HEALTHY
    )
    old = evaluate(cluster(), [producer(metadata_age_seconds=200)], thresholds=T, now=100)
    assert old.pod.verdict is V.METADATA_STALE
