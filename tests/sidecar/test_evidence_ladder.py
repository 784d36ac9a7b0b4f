"""The evidence ladder: silence alone never restarts; positive evidence does; a busy task clears.

Covered (constructed evidence, no I/O): every connection silent past the stall threshold
while Spark runs a task -> producer_silent (alert only) when no source says more; the
Python stack view: a thread inside a delivery callback the client called for the
heartbeat threshold -> producer_hung (with or without silence), a thread inside the
client's flush in two samples while silent -> producer_hung, one sample -> still silent,
every thread outside the client -> healthy with the clearing reason; the wrapper's
telemetry: nothing pending and a live heartbeat clears silence, pending with no delivery
is producer_hung as before; the JVM's thread dump: a task thread in flush for the stall
threshold while silent -> producer_hung, producer threads all in their own loop -> clears;
none of it while a broker fails; the stack tracker counts consecutive samples only.
"""

from __future__ import annotations

from dataclasses import replace

from hangwatch.contracts import Reachability as R
from hangwatch.contracts import Verdict as V
from hangwatch_sidecar.assessment import Thresholds
from hangwatch_sidecar.pystacks.judge import HeldThread, HeldView, StackTracker
from hangwatch_sidecar.pystacks.types import Place, StackView, ThreadPlace
from hangwatch_sidecar.round import RoundEvidence
from hangwatch_sidecar.rules import evaluate
from hangwatch_sidecar.spark.types import Activity, ThreadObservation
from tests.sidecar import spark_builders as sb
from tests.sidecar.builders import cluster, connection, producer, socket_view

T = Thresholds(
    stall_seconds=30, heartbeat_seconds=15, metadata_max_age_seconds=60, election_grace_seconds=15
)
SILENT = socket_view(connection(quiet_seconds=45.0))
TALKING = socket_view(connection(quiet_seconds=1.0))
CALLBACK = ThreadPlace(
    4242, 4242, "MainThread", False, Place.IN_CALLBACK, "Producer_flush",
    user_frame="on_delivery (job.py:88)", caller="write_partition (job.py:120)",
)  # fmt: skip
FLUSHING = replace(CALLBACK, place=Place.IN_CLIENT, user_frame="")
COMPUTING = ThreadPlace(4242, 4242, "MainThread", True, Place.OUTSIDE, user_frame="parse (x.py:3)")


def held(*threads: tuple[ThreadPlace, float, int]) -> HeldView:
    return HeldView(
        StackView(100.0, tuple(t for t, _, _ in threads), processes=1),
        tuple(HeldThread(t, s, n) for t, s, n in threads),
    )


def judge(sockets=SILENT, producers=(), **kw):  # type: ignore[no-untyped-def]
    evidence = RoundEvidence(
        kw.pop("cluster", cluster()), list(producers), sockets=sockets,
        spark_task_running=True, **kw,
    )  # fmt: skip
    return evaluate(evidence, thresholds=T, now=100).pod


def test_silence_alone_is_producer_silent_and_says_it_alerts_only() -> None:
    pod = judge()
    assert pod.verdict is V.PRODUCER_SILENT
    assert "silent for 45 s" in pod.reasons[0] and "alert only" in pod.reasons[-1]
    assert pod.evidence["connections_judged"] == ["10.0.0.9:40000->10.0.0.1:9092"]
    # the stack view sampled but unable to read: still silence alone
    broken = HeldView(StackView(100.0, error="py-spy could not read pid 7: denied"))
    assert judge(stacks=broken).verdict is V.PRODUCER_SILENT


def test_a_thread_held_in_a_delivery_callback_is_hung_with_or_without_silence() -> None:
    for sockets in (SILENT, TALKING):
        pod = judge(sockets=sockets, stacks=held((CALLBACK, 16.0, 4)))
        assert pod.verdict is V.PRODUCER_HUNG
        assert "on_delivery (job.py:88)" in pod.reasons[0] and "Producer_flush" in pod.reasons[0]
        assert pod.evidence["threads_judged"] == ["MainThread (pid 4242)"]
    # held shorter than the heartbeat threshold and a talking pod: nothing yet
    assert judge(sockets=TALKING, stacks=held((CALLBACK, 5.0, 2))).verdict is V.HEALTHY
    # ... but two samples in the callback while the pod is silent past the stall threshold
    silent = judge(stacks=held((CALLBACK, 2.0, 2)))
    assert silent.verdict is V.PRODUCER_HUNG and "in 2 samples" in silent.reasons[0]
    assert judge(stacks=held((CALLBACK, 0.0, 1))).verdict is V.PRODUCER_SILENT


def test_inside_the_client_while_silent_needs_two_samples() -> None:
    one = judge(stacks=held((FLUSHING, 0.0, 1)))
    assert one.verdict is V.PRODUCER_SILENT
    two = judge(stacks=held((FLUSHING, 3.0, 2)))
    assert two.verdict is V.PRODUCER_HUNG
    assert "waits inside the Kafka client's Producer_flush" in two.reasons[0]
    assert any(r.startswith("socket view: every connection") for r in two.reasons)
    # the same thread in flush while the pod talks: a busy producer, not stuck
    assert judge(sockets=TALKING, stacks=held((FLUSHING, 3.0, 2))).verdict is V.HEALTHY


def test_a_poll_loop_idling_in_poll_is_neither_stuck_nor_in_the_way() -> None:
    poll_loop = replace(
        FLUSHING, tid=4250, name="hangwatch-poll-1", client_call="Producer_poll",
        caller="HangwatchProducer._poll_loop (producer.py:411)",
    )  # fmt: skip
    assert not poll_loop.could_be_stuck
    alone = judge(stacks=held((poll_loop, 9.0, 5)))  # silent, the loop in poll: no evidence
    assert alone.verdict is V.HEALTHY  # ... nothing could be stuck: the task is elsewhere
    pod = judge(stacks=held((poll_loop, 9.0, 5), (COMPUTING, 0.0, 1)))
    assert pod.verdict is V.HEALTHY
    assert "computing in parse" in pod.evidence["silence_cleared"][0]


def test_a_task_busy_outside_the_client_clears_silence() -> None:
    pod = judge(stacks=held((COMPUTING, 0.0, 1)))
    assert pod.verdict is V.HEALTHY
    (why,) = pod.evidence["silence_cleared"]
    assert "computing in parse (x.py:3)" in why and "not in a Kafka client" in why


def test_wrapper_telemetry_with_nothing_pending_clears_silence_and_pending_is_hung() -> None:
    idle = judge(producers=[producer(pending=0, heartbeat_age_seconds=1.0)])
    assert idle.verdict is V.HEALTHY
    assert "nothing pending" in idle.evidence["silence_cleared"][0]
    stopped = judge(producers=[producer(pending=0, heartbeat_age_seconds=20.0)])
    assert stopped.verdict is V.PRODUCER_HUNG  # heartbeat stopped: the telemetry rung decides
    stalled = producer(pending=5, pending_seconds=40.0, progress_age_seconds=40.0)
    assert judge(producers=[stalled]).verdict is V.PRODUCER_HUNG
    young = producer(pending=5, pending_seconds=3.0, progress_age_seconds=3.0)
    assert judge(producers=[young]).verdict is V.PRODUCER_SILENT


def test_the_jvm_thread_dump_climbs_the_same_ladder() -> None:
    flushing = ThreadObservation(sb.thread(Activity.FLUSHING), 31.0)
    sending = ThreadObservation(sb.network(Activity.SENDING), 50.0)
    hung = judge(spark=sb.view(threads=(flushing,)))  # the I/O thread is gone
    assert hung.verdict is V.PRODUCER_HUNG
    assert "flushing for 31 s" in hung.reasons[0]
    assert hung.evidence["threads_judged"] == [flushing.thread.name]
    # the I/O thread in its own loop: a quota's throttle looks the same, alert only
    throttled = judge(spark=sb.view(threads=(flushing, sending)))
    assert throttled.verdict is V.PRODUCER_SILENT
    assert any("flushing for 31 s" in r for r in throttled.reasons)
    assert any("quota" in r for r in throttled.reasons), throttled.reasons
    short = ThreadObservation(sb.thread(Activity.FLUSHING), 10.0)
    assert judge(spark=sb.view(threads=(short, sending))).verdict is V.PRODUCER_SILENT
    cleared = judge(spark=sb.view(threads=(sending,)))
    assert cleared.verdict is V.HEALTHY
    assert "in their own loop" in cleared.evidence["silence_cleared"][0]


def test_no_producer_fault_while_a_broker_fails() -> None:
    failing = cluster(R.OK, R.TIMEOUT, R.OK)
    pod = judge(cluster=failing, stacks=held((CALLBACK, 60.0, 9)))
    assert pod.verdict is V.BROKER_DEGRADED
    assert any("while some brokers fail" in r for r in pod.reasons)


def test_the_tracker_counts_consecutive_samples_in_the_same_place() -> None:
    tracker = StackTracker()
    first = tracker.observe(StackView(10.0, (FLUSHING,)))
    second = tracker.observe(StackView(12.5, (FLUSHING,)))
    assert (first.threads[0].samples, second.threads[0].samples) == (1, 2)
    assert second.threads[0].held_seconds == 2.5
    moved = tracker.observe(StackView(14.0, (CALLBACK,)))  # another place: starts again
    assert (moved.threads[0].samples, moved.threads[0].held_seconds) == (1, 0.0)
    tracker.observe(StackView(15.0, (COMPUTING,)))  # outside: forgotten
    again = tracker.observe(StackView(16.0, (CALLBACK,)))
    assert again.threads[0].samples == 1
