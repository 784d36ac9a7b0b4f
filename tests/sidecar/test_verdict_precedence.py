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
from typing import Any

import pytest

from hangwatch.contracts import Reachability as R
from hangwatch.contracts import Verdict as V
from hangwatch_sidecar.assessment import Thresholds
from hangwatch_sidecar.evidence import BrokerObservation
from hangwatch_sidecar.round import RoundEvidence
from hangwatch_sidecar.rules import evaluate
from tests.sidecar.builders import cluster, producer

T = Thresholds(
    stall_seconds=30, heartbeat_seconds=15, metadata_max_age_seconds=60, election_grace_seconds=15
)
ANSWERED_LATELY = {
    "pending": 100,
    "pending_seconds": 31,
    "progress_age_seconds": 45,
    "answered_age_seconds": 0.5,
}
"""A stuck producer (no delivery for 45 s) one of whose requests was answered 0.5 s ago."""


def test_no_probe_yet_is_unknown() -> None:
    result = evaluate(RoundEvidence(None, [producer()]), thresholds=T, now=0)
    assert result.pod.verdict is V.UNKNOWN
    assert "no probe" in result.pod.reasons[0]


def test_s0_every_broker_blackholed_is_cluster_unreachable() -> None:
    result = evaluate(
        RoundEvidence(
            cluster(R.TIMEOUT, R.TIMEOUT, R.TIMEOUT),
            [producer(pending=50, pending_seconds=300, progress_age_seconds=300)],
        ),
        thresholds=T,
        now=100,
    )
    assert result.pod.verdict is V.CLUSTER_UNREACHABLE
    assert "timeout" in result.pod.reasons[0]
    assert result.producers["producer-42-1"].verdict is V.CLUSTER_UNREACHABLE


@pytest.mark.parametrize(
    ("leaderless", "stuck_seconds", "now", "since", "reason", "named"),
    [
        pytest.param(
            {"leaderless_topics": frozenset({"t"})},
            60,
            102,
            100.5,
            "within grace",
            ["t/*"],
            id="s2-within-grace-is-leader-election-not-hung",
        ),
        pytest.param(
            {"leaderless": frozenset({("t", 1)})},
            600,
            200,
            100,
            "beyond",
            ["t/1"],
            id="beyond-grace-still-blocks-producer-hung",
        ),
    ],
)
def test_an_election_is_leader_election_never_producer_hung(
    leaderless: dict[str, Any],
    stuck_seconds: float,
    now: float,
    since: float,
    reason: str,
    named: list[str],
) -> None:
    stuck = producer(pending=100, pending_seconds=stuck_seconds, progress_age_seconds=stuck_seconds)
    result = evaluate(
        RoundEvidence(cluster(**leaderless), [stuck], leaderless_since=since), thresholds=T, now=now
    )
    assert result.pod.verdict is V.LEADER_ELECTION
    assert reason in result.pod.reasons[0]
    assert result.pod.evidence["leaderless"] == named


def test_leaderless_partitions_of_other_topics_are_ignored() -> None:
    result = evaluate(
        RoundEvidence(
            cluster(leaderless_topics=frozenset({"other"})), [producer()], leaderless_since=90
        ),
        thresholds=T,
        now=100,
    )
    assert result.pod.verdict is V.HEALTHY


BLAMED: dict[str, tuple[dict[str, Any], V, str]] = {
    "s2-stuck-after-leaders-are-back": (
        {"pending": 100, "pending_seconds": 31, "progress_age_seconds": 45},
        V.PRODUCER_HUNG,
        "100 messages pending",
    ),
    "s4-heartbeat-stopped-while-alive": (
        {
            "pending": 10,
            "heartbeat_age_seconds": 16,
            "pending_seconds": 16,
            "progress_age_seconds": 16,
        },
        V.PRODUCER_HUNG,
        "heartbeat stopped",
    ),
    "s1-failing-while-cluster-healthy": (
        {"failed_total": 500, "failing_seconds": 40, "progress_age_seconds": 40},
        V.METADATA_STALE,
        "failed for 40 s",
    ),
    "s1-stuck-but-answered-is-metadata-stale-not-hung": (
        {**ANSWERED_LATELY, "awaiting_responses": 0},
        V.METADATA_STALE,
        "keep answering",
    ),
    "s2-stuck-with-unanswered-requests-is-hung-even-if-other-answers-came": (
        {**ANSWERED_LATELY, "awaiting_responses": 3},
        V.PRODUCER_HUNG,
        "100 messages pending",
    ),
}
"""One producer's telemetry on a healthy cluster -> (verdict, a phrase of its reason)."""


@pytest.mark.parametrize(("fields", "verdict", "reason"), BLAMED.values(), ids=BLAMED.keys())
def test_one_producer_on_a_healthy_cluster_is_blamed(
    fields: dict[str, Any], verdict: V, reason: str
) -> None:
    result = evaluate(RoundEvidence(cluster(), [producer(**fields)]), thresholds=T, now=100)
    assert result.pod.verdict is verdict
    assert reason in result.pod.reasons[0]
    assert result.pod.evidence["producers"] == ["producer-42-1"]


def test_pending_but_recently_delivering_is_healthy() -> None:
    busy = producer(pending=5000, pending_seconds=600, progress_age_seconds=0.2)
    assert (
        evaluate(RoundEvidence(cluster(), [busy]), thresholds=T, now=100).pod.verdict is V.HEALTHY
    )


def test_stale_heartbeat_without_known_liveness_or_after_exit_is_not_hung() -> None:
    unknown = producer(alive=None, pending=10, heartbeat_age_seconds=100, pending_seconds=5)
    exited = producer(alive=False, pending=10, heartbeat_age_seconds=100, pending_seconds=5)
    assert (
        evaluate(RoundEvidence(cluster(), [unknown]), thresholds=T, now=100).pod.verdict
        is V.HEALTHY
    )
    result = evaluate(RoundEvidence(cluster(), [exited]), thresholds=T, now=100)
    assert result.producers["producer-42-1"].verdict is V.UNKNOWN


def test_stalled_during_broker_failure_is_broker_degraded_never_hung() -> None:
    stuck = producer(pending=100, pending_seconds=90, progress_age_seconds=90)
    result = evaluate(RoundEvidence(cluster(R.OK, R.TIMEOUT, R.OK), [stuck]), thresholds=T, now=100)
    assert result.pod.verdict is V.BROKER_DEGRADED


def test_s1_leader_disagreement_with_old_metadata_is_metadata_stale() -> None:
    leaders = {("t", 0): 3, ("t", 1): 2, ("t", 2): 3}
    stale = producer(
        leaders=leaders,
        metadata_age_seconds=90,
        disagreeing_seconds=60,
        pending=12,
        pending_seconds=2.0,
    )
    result = evaluate(RoundEvidence(cluster(), [stale]), thresholds=T, now=100)
    assert result.pod.verdict is V.METADATA_STALE
    assert result.producers["producer-42-1"].evidence["leader_disagreements"] == [
        "t/0: producer says 3, cluster says 1"
    ]
    assert "for 60 s" in result.pod.reasons[0]
    fresh = replace(stale, metadata_age_seconds=5)  # within election grace
    assert (
        evaluate(RoundEvidence(cluster(), [fresh]), thresholds=T, now=100).pod.verdict is V.HEALTHY
    )


def test_leaders_that_just_moved_are_no_proof_however_old_the_producers_metadata() -> None:
    # Apache Kafka, a real 1.5 s election: the producer last refreshed 9 s before the
    # leaders moved, so its metadata was "older than an election" the moment they moved,
    # and it was called stale while it recovered. The grace counts from the disagreement.
    moved = producer(
        leaders={("t", 0): 3}, metadata_age_seconds=40, disagreeing_seconds=0.0, pending=12
    )
    assert (
        evaluate(RoundEvidence(cluster(), [moved]), thresholds=T, now=100).pod.verdict is V.HEALTHY
    )
    within = replace(moved, disagreeing_seconds=T.election_grace_seconds)
    assert (
        evaluate(RoundEvidence(cluster(), [within]), thresholds=T, now=100).pod.verdict is V.HEALTHY
    )
    past = replace(moved, disagreeing_seconds=T.election_grace_seconds + 1)
    result = evaluate(RoundEvidence(cluster(), [past]), thresholds=T, now=100)
    assert result.pod.verdict is V.METADATA_STALE
    assert result.producers["producer-42-1"].evidence["disagreeing_seconds"] == 16.0


def test_an_idle_producer_with_leaders_from_before_an_election_is_healthy() -> None:
    # A task paused through an election: nothing to send, its cached leaders are old. Its
    # next send refreshes them (NOT_LEADER), or its periodic refresh: no restart for that
    # (the false-restart soak restarted such executors before this rule).
    idle = producer(leaders={("t", 0): 3}, metadata_age_seconds=50, pending=0)
    result = evaluate(RoundEvidence(cluster(), [idle]), thresholds=T, now=100)
    assert result.pod.verdict is V.HEALTHY
    assert result.producers["producer-42-1"].evidence["leader_disagreements"]


def test_s3_blackholed_and_refused_brokers_are_named_with_their_class() -> None:
    result = evaluate(
        RoundEvidence(cluster(R.OK, R.TIMEOUT, R.REFUSED), [producer()]), thresholds=T, now=100
    )
    assert result.pod.verdict is V.BROKER_DEGRADED
    assert result.pod.reasons == (
        "broker 10.0.0.2:9092 (node 2) is timeout",
        "broker 10.0.0.3:9092 (node 3) is refused",
    )
    assert result.pod.evidence["brokers"]["10.0.0.2:9092"]["reachability"] == "timeout"


def test_no_telemetry_yet_is_unknown_with_a_reason() -> None:
    result = evaluate(RoundEvidence(cluster(), []), thresholds=T, now=100)
    assert result.pod.verdict is V.UNKNOWN
    assert "no producer telemetry" in result.pod.reasons[0]


def test_unusable_telemetry_is_unknown_for_that_producer_only() -> None:
    bad = producer(key="producer-7-1", problem="telemetry is not valid JSON")
    result = evaluate(RoundEvidence(cluster(), [producer(), bad]), thresholds=T, now=100)
    assert result.pod.verdict is V.HEALTHY
    assert result.producers["producer-7-1"].verdict is V.UNKNOWN
    assert result.producers["producer-7-1"].reasons == ("telemetry is not valid JSON",)


def test_hung_outranks_stale_and_degraded_across_producers() -> None:
    hung = producer(key="a", pending=10, pending_seconds=40, progress_age_seconds=40)
    stale = producer(key="b", failed_total=9, failing_seconds=40)
    result = evaluate(RoundEvidence(cluster(), [stale, hung]), thresholds=T, now=100)
    assert result.pod.verdict is V.PRODUCER_HUNG
    assert result.producers["b"].verdict is V.METADATA_STALE


def test_s1_dead_bootstrap_entries_do_not_excuse_a_failing_producer() -> None:
    base = cluster()
    dead = BrokerObservation(
        address="10.0.0.9:9092", reachability=R.REFUSED, in_bootstrap=True, advertised=False
    )
    with_dead = replace(base, brokers=(*base.brokers, dead))
    failing = producer(failed_total=500, failing_seconds=40, progress_age_seconds=40)
    result = evaluate(RoundEvidence(with_dead, [failing]), thresholds=T, now=100)
    assert result.pod.verdict is V.METADATA_STALE
    healthy = evaluate(RoundEvidence(with_dead, [producer()]), thresholds=T, now=100)
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
        RoundEvidence(replace(base, brokers=(*base.brokers, gone)), [producer()]),
        thresholds=T,
        now=100,
    )
    assert result.pod.verdict is V.BROKER_DEGRADED
    assert result.pod.reasons == (
        "broker 10.0.0.2:9092 (node 2, gone from the cluster's metadata) is refused",
    )


def test_s4_heartbeat_stopped_counts_even_if_last_snapshot_had_nothing_pending() -> None:
    blocked = producer(pending=0, heartbeat_age_seconds=16)
    result = evaluate(RoundEvidence(cluster(), [blocked]), thresholds=T, now=100)
    assert result.pod.verdict is V.PRODUCER_HUNG


def test_metadata_older_than_allowed_is_stale_but_normal_refresh_age_is_not() -> None:
    assert (
        evaluate(
            RoundEvidence(cluster(), [producer(metadata_age_seconds=59)]), thresholds=T, now=100
        ).pod.verdict
        is V.HEALTHY
    )
    old = evaluate(
        RoundEvidence(cluster(), [producer(metadata_age_seconds=200)]), thresholds=T, now=100
    )
    assert old.pod.verdict is V.METADATA_STALE
