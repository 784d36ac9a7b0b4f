"""The verdict engine weighs Spark's view of the executor (pure).

Covers: without wrapper telemetry, a JVM producer's I/O thread held in a user callback
with the cluster healthy -> `producer_hung` naming the thread (and taking over at once
through the debouncer); a task thread waiting for metadata -> `metadata_stale` once the executor has
finished a task (before: corroborating only), or `writes_rejected` when a topic the
policy names is not in the cluster's metadata; a JVM
producer that works -> `healthy` (a producer is visible); a straggler alone, or a task
with no visible producer -> `unknown` saying so (a straggler is never a verdict on its
own); with telemetry, Spark's findings and stragglers are added as reasons to the
telemetry's verdict; precedence: no broker answering or a leaderless partition wins
over the Spark view, a failing broker turns the hung callback into a corroborating
`broker_degraded` reason (its thread in the evidence); an unavailable view leaves
`unknown` saying why the driver could not be read; the Spark view off (None) leaves
everything as before; /status carries the Spark section, bounded, in the wire format
the operator decodes (what matters listed first).
"""

from __future__ import annotations

from hangwatch.contracts import Reachability, Verdict
from hangwatch.wire import status
from hangwatch_sidecar.assessment import Thresholds
from hangwatch_sidecar.hysteresis import Debouncer
from hangwatch_sidecar.round import RoundEvidence
from hangwatch_sidecar.rules import evaluate
from hangwatch_sidecar.spark.types import Activity, RunningTask, SparkView, ThreadObservation
from hangwatch_sidecar.state import SPARK_SHOWN, SidecarState, status_document

from .builders import cluster, producer
from .spark_builders import network, peers, task, thread, view

T = Thresholds(stall_seconds=30, heartbeat_seconds=15)
HUNG_IO = ThreadObservation(network(), 20.0)
SENDING_IO = ThreadObservation(network(Activity.SENDING, "RUNNABLE"), 600.0)
STRAGGLER = RunningTask(task(7), 95.0, peers(), straggler=True)


def _pod(spark: SparkView | None, producers: tuple[object, ...] = (), **kw: object) -> object:
    return evaluate(
        RoundEvidence(kw.pop("c", cluster()), producers, spark=spark, **kw), thresholds=T, now=100.0
    ).pod


def test_hung_jvm_io_thread_without_telemetry_is_producer_hung() -> None:
    pod = _pod(view(threads=(HUNG_IO,)))
    assert pod.verdict is Verdict.PRODUCER_HUNG
    (reason,) = pod.reasons
    assert reason.startswith("spark view: producer I/O thread 'kafka-producer-network-thread")
    assert pod.evidence["spark_threads"] == ["kafka-producer-network-thread | orders"]
    assert pod.evidence["producers"] == []
    debouncer = Debouncer(hold=3)
    assert debouncer.update(pod.verdict, 1.0) and debouncer.current is Verdict.PRODUCER_HUNG


def test_task_waiting_for_metadata_without_telemetry_is_metadata_stale() -> None:
    waiting = ThreadObservation(thread(Activity.AWAITING_METADATA), 31.0)
    running = (RunningTask(task(7), 31.0),)
    pod = _pod(view(tasks=running, threads=(waiting,), completed_tasks=3))
    assert pod.verdict is Verdict.METADATA_STALE
    assert "has waited for topic metadata for 31 s" in pod.reasons[0]


def test_a_metadata_wait_before_the_executors_first_finished_task_is_never_stale() -> None:
    """The refused-login run on the lab (Spark's sink, load 25): the fresh producer's
    first metadata fetch waited 6 s past a 5 s stall threshold before the task failed with
    SaslAuthenticationException. A producer that never had the cluster's view cannot have
    a wrong one; a new executor starts the same way: no restart verdict, whether the
    driver says no task finished yet or has not said (a local JVM dump). (The finding
    only corroborates: a healthy verdict carries no reasons, as with a lone straggler.)"""
    waiting = ThreadObservation(thread(Activity.AWAITING_METADATA), 31.0)
    running = (RunningTask(task(7), 31.0),)
    for completed in (0, None):
        pod = _pod(view(tasks=running, threads=(waiting,), completed_tasks=completed))
        assert pod.verdict is Verdict.HEALTHY, completed


def test_waiting_for_metadata_of_a_topic_the_cluster_lacks_is_writes_rejected() -> None:
    """The pod's policy names its topics; the cluster's metadata does not have one: the
    JVM's wait for metadata is that topic's (Spark's sink writing to a topic that does not
    exist waits max.block.ms per send), never a restart."""
    waiting = ThreadObservation(thread(Activity.AWAITING_METADATA), 31.0)
    spark = view(tasks=(RunningTask(task(7), 31.0),), threads=(waiting,), completed_tasks=1)
    told = cluster(absent_topics=frozenset({"orders"}), metadata_age_seconds=4.0)
    pod = _pod(spark, c=told, topics=frozenset({"orders", "audit"}))
    assert pod.verdict is Verdict.WRITES_REJECTED
    assert "does not have topic orders" in pod.reasons[0] and "create it" in pod.reasons[0]
    # the policy names no topic: the sidecar cannot tell which the JVM waits for
    assert _pod(spark, c=told).verdict is Verdict.METADATA_STALE
    # its topics exist
    assert _pod(spark, topics=frozenset({"orders"})).verdict is Verdict.METADATA_STALE


def test_working_jvm_producer_is_healthy_and_a_straggler_alone_is_not_a_verdict() -> None:
    assert _pod(view(threads=(SENDING_IO,))).verdict is Verdict.HEALTHY
    healthy = _pod(view(tasks=(STRAGGLER,), threads=(SENDING_IO,)))
    assert healthy.verdict is Verdict.HEALTHY and healthy.reasons == ()
    lone = _pod(view(tasks=(STRAGGLER,)))
    assert lone.verdict is Verdict.UNKNOWN
    assert "no Kafka producer thread in the executor's JVM (1 task(s) running)" in lone.reasons[0]


def test_with_telemetry_spark_findings_and_stragglers_are_added_reasons() -> None:
    stuck = producer(heartbeat_age_seconds=40.0)
    pod = _pod(view(tasks=(STRAGGLER,), threads=(HUNG_IO,)), (stuck,))
    assert pod.verdict is Verdict.PRODUCER_HUNG
    assert pod.reasons[0].startswith("producer producer-42-1: telemetry heartbeat stopped")
    assert pod.reasons[1].startswith("spark view: producer I/O thread")
    assert "(a straggler)" in pod.reasons[2]
    fine = _pod(view(tasks=(STRAGGLER,)), (producer(),))
    assert fine.verdict is Verdict.HEALTHY  # a straggler does not overrule a delivering producer


def test_cluster_faults_come_first() -> None:
    spark = view(threads=(HUNG_IO,))
    down = cluster(Reachability.TIMEOUT, Reachability.TIMEOUT, Reachability.TIMEOUT)
    pod = _pod(spark, c=down)
    assert pod.verdict is Verdict.CLUSTER_UNREACHABLE and len(pod.reasons) == 1
    election = _pod(spark, c=cluster(leaderless_topics=frozenset({"t"})), topics=frozenset({"t"}))
    assert election.verdict is Verdict.LEADER_ELECTION and len(election.reasons) == 1
    degraded = _pod(spark, c=cluster(Reachability.OK, Reachability.TIMEOUT, Reachability.OK))
    assert degraded.verdict is Verdict.BROKER_DEGRADED
    assert any("not judged a producer fault" in r for r in degraded.reasons)
    assert degraded.evidence["spark_threads"] == ["kafka-producer-network-thread | orders"]


def test_unavailable_view_says_why_and_view_off_changes_nothing() -> None:
    down = SparkView(at=90.0, available=False, error="connection to http://d:4040 refused")
    pod = _pod(down)
    assert pod.verdict is Verdict.UNKNOWN
    assert "Spark view unavailable: connection to http://d:4040 refused" in pod.reasons[0]
    off = _pod(None)
    assert off.reasons == ("no producer telemetry yet; cluster answers",)


def test_status_document_has_a_bounded_spark_section_the_wire_format_reads() -> None:
    many = (STRAGGLER, *(RunningTask(task(i), 1.0) for i in range(100)))
    spark = view(tasks=many, threads=(SENDING_IO,) + (HUNG_IO,) * 40)
    state = SidecarState(started_ts=0.0, spark_ui="http://d:4040", spark=spark)
    decoded = status.decode(status.encode(status_document(state)))
    section = decoded.spark
    assert section is not None and section.driver_ui == "http://d:4040" and section.available
    assert section.tasks_total == 101 and len(section.tasks) == SPARK_SHOWN
    assert section.tasks[0].straggler and section.tasks[0].stage_median_seconds == 2.0
    assert section.producer_threads_total == 41 and len(section.producer_threads) == SPARK_SHOWN
    assert section.producer_threads[0].activity == "in_callback"  # what matters first
    assert status.decode(status.encode(status_document(SidecarState(started_ts=0.0)))).spark is None
