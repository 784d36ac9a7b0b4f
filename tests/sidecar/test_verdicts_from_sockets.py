"""The verdict engine with the socket view, for producers without hangwatch's telemetry.

Covered (constructed evidence, no I/O): no telemetry + a request unanswered on a live
connection while the cluster is healthy -> producer_hung naming the connection and
broker (S2, any client); the same during an election -> leader_election, while a member
broker fails -> broker_degraded (never a producer fault); the pod's own connections to
one broker blackholed -> broker_degraded naming it, also when the sidecar's probe of
that broker succeeded; every broker unreachable -> cluster_unreachable with the socket
view's corroboration; refused entries + failed connects -> broker_degraded with the
corroborating count (S1); idle connections -> healthy; silence + Spark running a task ->
producer_silent (alert only: silence alone is not evidence of a hang; the evidence
ladder's tests are in test_evidence_ladder.py), silence with Spark's view unknown or no
task -> healthy, unless a write interval was declared (a producer service): silence past
it -> producer_silent without Spark's view, not while Spark says no task runs; no
telemetry and no connection -> unknown (nothing to judge), with the socket view's error
when it is unavailable; with telemetry the socket view corroborates; the
evidence lists a bounded number of connections.
"""

from __future__ import annotations

from dataclasses import replace

from hangwatch.contracts import Reachability as R
from hangwatch.contracts import Verdict as V
from hangwatch_sidecar.assessment import MAX_CONNECTIONS_SHOWN, Thresholds
from hangwatch_sidecar.round import RoundEvidence
from hangwatch_sidecar.rules import evaluate
from hangwatch_sidecar.sockets.types import Pattern
from tests.sidecar.builders import cluster, connection, producer, socket_view

T = Thresholds(
    stall_seconds=30, heartbeat_seconds=15, metadata_max_age_seconds=60, election_grace_seconds=15
)
IDLE = connection()
UNANSWERED = replace(IDLE, pattern=Pattern.UNANSWERED, waiting_seconds=42.0)
BLACKHOLED = replace(
    IDLE,
    connection="10.0.0.9:40001->10.0.0.2:9092",
    broker="10.0.0.2:9092",
    pattern=Pattern.BLACKHOLED,
    unacked=1,
    retransmits=3,
    waiting_seconds=2.0,
)


view = socket_view


def test_unanswered_request_without_telemetry_is_producer_hung_naming_it() -> None:
    result = evaluate(
        RoundEvidence(cluster(), [], sockets=view(UNANSWERED, IDLE)), thresholds=T, now=100
    )
    assert result.pod.verdict is V.PRODUCER_HUNG
    (reason,) = result.pod.reasons
    assert reason.startswith("socket view: connection 10.0.0.9:40000->10.0.0.1:9092")
    assert "unanswered for 42 s" in reason
    assert result.pod.evidence["connections_judged"] == [UNANSWERED.connection]
    assert result.pod.evidence["sockets"]["connections"][0]["pattern"] == "unanswered"


def test_unanswered_during_an_election_or_a_broker_failure_is_not_hung() -> None:
    election = evaluate(
        RoundEvidence(
            cluster(leaderless_topics=frozenset({"t"})),
            [],
            leaderless_since=99,
            topics=frozenset({"t"}),
            sockets=view(UNANSWERED),
        ),
        thresholds=T,
        now=100,
    )
    assert election.pod.verdict is V.LEADER_ELECTION
    failing = evaluate(
        RoundEvidence(cluster(R.OK, R.TIMEOUT, R.OK), [], sockets=view(UNANSWERED)),
        thresholds=T,
        now=100,
    )
    assert failing.pod.verdict is V.BROKER_DEGRADED
    assert any("not judged a producer fault" in r for r in failing.pod.reasons)


def test_blackholed_connection_names_its_broker_even_when_the_probe_answered() -> None:
    result = evaluate(
        RoundEvidence(cluster(), [], sockets=view(IDLE, BLACKHOLED)), thresholds=T, now=100
    )
    assert result.pod.verdict is V.BROKER_DEGRADED
    assert any("broker 10.0.0.2:9092" in r and "blackholed" in r for r in result.pod.reasons)
    probed = evaluate(
        RoundEvidence(cluster(R.OK, R.TIMEOUT, R.OK), [], sockets=view(IDLE, BLACKHOLED)),
        thresholds=T,
        now=100,
    )
    assert probed.pod.verdict is V.BROKER_DEGRADED
    assert probed.pod.reasons[0].startswith("broker 10.0.0.2:9092 (node 2) is timeout")
    assert probed.pod.reasons[1].startswith("socket view: the pod's own connections")


def test_every_broker_unreachable_is_cluster_unreachable_with_corroboration() -> None:
    result = evaluate(
        RoundEvidence(cluster(R.TIMEOUT, R.TIMEOUT, R.TIMEOUT), [], sockets=view(BLACKHOLED)),
        thresholds=T,
        now=100,
    )
    assert result.pod.verdict is V.CLUSTER_UNREACHABLE
    assert len(result.pod.reasons) == 2 and "blackholed" in result.pod.reasons[1]


def test_unanswered_on_a_removed_broker_that_fails_the_probes_is_the_brokers_fault() -> None:
    # kafka-go v0.4.8 after a shrink: its request waits on the removed broker (frozen,
    # still in the bootstrap list, gone from the metadata) while the members answer; the
    # client moves on by itself 12-14 s later. Evidence against that broker, not a restart.
    removed = replace(
        cluster().brokers[0],
        address="10.0.0.7:9092",
        reachability=R.UNRESPONSIVE,
        node_id=4,
        advertised=False,
    )
    shrunk = replace(cluster(), brokers=(*cluster().brokers, removed))
    waiting = replace(
        UNANSWERED, connection="10.0.0.9:40007->10.0.0.7:9092", broker="10.0.0.7:9092"
    )
    result = evaluate(RoundEvidence(shrunk, [], sockets=view(waiting)), thresholds=T, now=100)
    assert result.pod.verdict is V.BROKER_DEGRADED
    assert any("evidence against the broker, not the producer" in r for r in result.pod.reasons)
    # the same wait on a member that answers the probes is the producer's
    member = replace(UNANSWERED)
    assert evaluate(
        RoundEvidence(shrunk, [], sockets=view(member)), thresholds=T, now=100
    ).pod.verdict is (V.PRODUCER_HUNG)


def test_refused_entries_with_failed_connects_are_corroborated() -> None:
    dead = replace(cluster(), brokers=(*cluster().brokers,))
    dead = replace(
        dead,
        brokers=(
            *dead.brokers,
            replace(
                dead.brokers[0],
                address="10.0.0.7:9092",
                reachability=R.REFUSED,
                node_id=None,
                advertised=False,
            ),
        ),
    )
    result = evaluate(
        RoundEvidence(dead, [], sockets=view(IDLE, failed_connects=9, failed_connects_seconds=5.0)),
        thresholds=T,
        now=100,
    )
    assert result.pod.verdict is V.BROKER_DEGRADED
    assert result.pod.reasons[0] == "bootstrap entry 10.0.0.7:9092 is refused"
    assert "failed 9 connects" in result.pod.reasons[1]


def test_idle_connections_are_healthy_and_silence_needs_a_running_task() -> None:
    quiet = view(replace(IDLE, quiet_seconds=120.0))
    assert (
        evaluate(RoundEvidence(cluster(), [], sockets=quiet), thresholds=T, now=100).pod.verdict
        is V.HEALTHY
    )
    for running in (None, False):
        result = evaluate(
            RoundEvidence(cluster(), [], sockets=quiet, spark_task_running=running),
            thresholds=T,
            now=100,
        )
        assert result.pod.verdict is V.HEALTHY
    silent = evaluate(
        RoundEvidence(cluster(), [], sockets=quiet, spark_task_running=True), thresholds=T, now=100
    )
    assert silent.pod.verdict is V.PRODUCER_SILENT
    assert "silent for 120 s" in silent.pod.reasons[0]
    assert "alert only" in silent.pod.reasons[-1]
    assert not silent.pod.held  # silence while a task runs keeps the hysteresis


def test_a_declared_write_interval_makes_silence_producer_silent_without_spark() -> None:
    """A producer service (no Spark view) whose policy says it writes at least every 10 s:
    silence past that is producer_silent (alert only), before the stall threshold."""
    declared = replace(T, expected_write_interval_seconds=10.0)
    quiet = view(replace(IDLE, quiet_seconds=12.0))
    assert (
        evaluate(RoundEvidence(cluster(), [], sockets=quiet), thresholds=T, now=100).pod.verdict
        is V.HEALTHY
    )
    silent = evaluate(RoundEvidence(cluster(), [], sockets=quiet), thresholds=declared, now=100)
    assert silent.pod.verdict is V.PRODUCER_SILENT
    assert "longer than the expected write interval (10 s" in silent.pod.reasons[0]
    assert "alert only" in silent.pod.reasons[-1]
    assert silent.pod.evidence["connections_judged"] == [IDLE.connection]
    assert silent.pod.held  # the silence lasted the whole declared interval
    within = evaluate(
        RoundEvidence(cluster(), [], sockets=view(replace(IDLE, quiet_seconds=9.0))),
        thresholds=declared,
        now=100,
    )
    assert within.pod.verdict is V.HEALTHY
    between_tasks = evaluate(
        RoundEvidence(cluster(), [], sockets=quiet, spark_task_running=False),
        thresholds=declared,
        now=100,
    )
    assert between_tasks.pod.verdict is V.HEALTHY


def test_nothing_to_judge_is_unknown_with_why() -> None:
    none = evaluate(RoundEvidence(cluster(), [], sockets=view()), thresholds=T, now=100)
    assert none.pod.verdict is V.UNKNOWN
    assert none.pod.reasons == (
        "no producer telemetry and no connection of the pod to a broker; cluster answers",
    )
    broken = evaluate(
        RoundEvidence(cluster(), [], sockets=view(error="sock_diag netlink unavailable: x")),
        thresholds=T,
        now=100,
    )
    assert (
        broken.pod.verdict is V.UNKNOWN and "sock_diag netlink unavailable" in broken.pod.reasons[0]
    )


def test_with_telemetry_the_socket_view_corroborates() -> None:
    stuck = producer(pending=100, pending_seconds=60, progress_age_seconds=60, awaiting_responses=3)
    result = evaluate(
        RoundEvidence(cluster(), [stuck], sockets=view(UNANSWERED)), thresholds=T, now=100
    )
    assert result.pod.verdict is V.PRODUCER_HUNG
    assert result.pod.reasons[0].startswith("producer producer-42-1:")
    assert result.pod.reasons[1].startswith("socket view: connection")
    healthy = evaluate(
        RoundEvidence(cluster(), [producer()], sockets=view(IDLE)), thresholds=T, now=100
    )
    assert healthy.pod.verdict is V.HEALTHY


def test_evidence_lists_a_bounded_number_of_connections() -> None:
    many = [
        replace(UNANSWERED, connection=f"10.0.0.9:{41000 + i}->10.0.0.1:9092") for i in range(200)
    ]
    result = evaluate(RoundEvidence(cluster(), [], sockets=view(*many)), thresholds=T, now=100)
    sockets = result.pod.evidence["sockets"]
    assert sockets["connections_total"] == 200
    assert len(sockets["connections"]) == MAX_CONNECTIONS_SHOWN
    assert len(result.pod.evidence["connections_judged"]) == MAX_CONNECTIONS_SHOWN
