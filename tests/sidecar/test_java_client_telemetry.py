"""The Java client's reporter's telemetry: it names refusals and throttles, it never accuses.

Covers (constructed evidence and documents, no I/O): a Java producer whose records wait
unanswered past the stall threshold, whose sends keep failing while every broker answers,
or whose document stopped being refreshed is never `producer_hung` or `metadata_stale`
(the same observation of the wrapper's producer is, the control): its counters are no proof
of a hang (Spark's view of the JVM's threads judges those); its failures naming a refusal
(MESSAGE_TOO_LARGE, TOPIC_AUTHORIZATION_FAILED) are `writes_rejected`; batch splits still
growing while nothing is delivered are `writes_rejected` naming MESSAGE_TOO_LARGE and the
splits (the Java client expires the split batches, so the failures name only a timeout),
while splits of a producer that delivers are nothing; silence while a broker's quota
throttles a producer clears (the Java client mutes a throttled connection), silence beside
a Java document that counts no sends (the reporter loaded as a metrics reporter only) does
not clear; the tracker reads `client` and `splits` (absent from the wrapper's documents);
any Java observation (hypothesis) never gives a restart-class producer verdict.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from hangwatch.contracts import Verdict as V
from hangwatch_producer.wire import telemetry as wire
from hangwatch_sidecar.assessment import Thresholds
from hangwatch_sidecar.evidence import ErrorObserved, SplitsObserved
from hangwatch_sidecar.round import RoundEvidence
from hangwatch_sidecar.rules import evaluate
from hangwatch_sidecar.tracking import ProducerTracker
from tests.sidecar.builders import cluster, connection, producer, socket_view

T = Thresholds(
    stall_seconds=5, heartbeat_seconds=15, metadata_max_age_seconds=60, election_grace_seconds=15
)
WALL = 1_800_000_000.0
RESTART_CLASS = {V.PRODUCER_HUNG, V.METADATA_STALE}
WAITING = {"pending": 20, "pending_seconds": 9, "progress_age_seconds": None}
FAILING = {"failing_seconds": 12.0, "failed_total": 40, "progress_age_seconds": 30.0}
SPLITS = SplitsObserved(count=37, last_age_seconds=0.5, first_age_seconds=8.0, first_ts=WALL - 8)
EXPIRED = ErrorObserved("REQUEST_TIMED_OUT", "small", 20, 1.0, 6.0, WALL - 6)


def verdict(*producers: object, **kw: object) -> V:
    evidence = RoundEvidence(cluster(), list(producers), **kw)  # type: ignore[arg-type]
    return evaluate(evidence, thresholds=T, now=100).pod.verdict


def test_a_java_producer_waiting_or_failing_is_never_restart_class() -> None:
    for seen in (WAITING, FAILING, {"heartbeat_age_seconds": 40.0}):
        assert verdict(producer(**seen)) in RESTART_CLASS, seen  # the wrapper's: the control
        assert verdict(producer(**seen, java=True)) is V.HEALTHY, seen


def test_a_java_producers_refusal_is_writes_rejected() -> None:
    refused = ErrorObserved("MESSAGE_TOO_LARGE", "small", 20, 0.5, 9.0, WALL - 9)
    result = evaluate(
        RoundEvidence(cluster(), [producer(**WAITING, java=True, errors=(refused,))]),
        thresholds=T,
        now=100,
    )
    assert result.pod.verdict is V.WRITES_REJECTED
    assert "MESSAGE_TOO_LARGE" in result.pod.reasons[0] and "small" in result.pod.reasons[0]


def test_growing_splits_while_nothing_is_delivered_name_the_record_too_large() -> None:
    stuck = producer(**WAITING, java=True, errors=(EXPIRED,), splits=SPLITS, topics={"small"})
    result = evaluate(RoundEvidence(cluster(), [stuck]), thresholds=T, now=100)
    assert result.pod.verdict is V.WRITES_REJECTED, result.pod.reasons
    (reason,) = result.pod.reasons
    assert "writes to topic small refused: MESSAGE_TOO_LARGE" in reason
    assert "37 batches the broker refused as too large, split by the Java client" in reason
    (shown,) = result.producers[stuck.key].evidence["writes_rejected"]
    assert shown["error"] == "MESSAGE_TOO_LARGE" and shown["count"] == 37


def test_splits_of_a_delivering_producer_or_long_ago_are_nothing() -> None:
    assert (
        verdict(producer(pending=20, pending_seconds=9, progress_age_seconds=0.5, java=True,
                         splits=SPLITS))
        is V.HEALTHY
    )  # fmt: skip
    old = SplitsObserved(count=3, last_age_seconds=60.0, first_age_seconds=70.0, first_ts=WALL)
    assert verdict(producer(**WAITING, java=True, splits=old)) is V.HEALTHY


SILENT = socket_view(connection(quiet_seconds=45.0))


def test_a_throttled_producer_clears_silence_and_an_uncounting_java_document_does_not() -> None:
    throttled = producer(pending=20, pending_seconds=3, progress_age_seconds=2.0, java=True,
                         throttle_age_seconds=1.0, throttle_seconds=4.0)  # fmt: skip
    pod = evaluate(
        RoundEvidence(cluster(), [throttled], sockets=SILENT, spark_task_running=True),
        thresholds=T,
        now=100,
    ).pod
    assert pod.verdict is V.HEALTHY, pod.reasons
    assert any("quota throttles" in r for r in pod.evidence["silence_cleared"])
    idle = producer(pending=0, java=True)
    assert verdict(idle, sockets=SILENT, spark_task_running=True) is V.HEALTHY  # nothing pending
    uncounted = producer(pending=0, java=True, counts_pending=False)
    assert verdict(uncounted, sockets=SILENT, spark_task_running=True) is V.PRODUCER_SILENT


def _document(**changes: object) -> wire.TelemetryDocument:
    base = {"schema": 1, "kind": wire.KIND, "seq": 5, "ts": WALL, "counters": {"enqueued": 10}}
    return wire.from_builtins({**base, **changes})


def test_the_tracker_reads_the_java_clients_fields() -> None:
    java = _document(
        client={"library": "kafka-clients", "version": "3.9.2", "acknowledgements": True},
        splits={"count": 4, "first_ts": WALL - 10, "last_ts": WALL - 2},
    )
    seen = ProducerTracker().observe("producer-7-1", java, True, 100.0, WALL)
    assert seen.java and seen.counts_pending
    assert seen.splits == SplitsObserved(4, 2.0, 10.0, WALL - 10)
    reporter_only = _document(client={"library": "kafka-clients"})
    seen = ProducerTracker().observe("producer-7-2", reporter_only, True, 100.0, WALL)
    assert seen.java and not seen.counts_pending and seen.splits is None
    wrapper = ProducerTracker().observe("producer-8-1", _document(), True, 100.0, WALL)
    assert not wrapper.java and wrapper.counts_pending and wrapper.splits is None


@given(
    pending=st.integers(0, 10_000),
    pending_seconds=st.floats(0, 1e4),
    failing_seconds=st.floats(0, 1e4),
    heartbeat=st.floats(0, 1e4),
    progress=st.none() | st.floats(0, 1e4),
    splits=st.none() | st.builds(SplitsObserved, st.integers(1, 10**6), st.floats(0, 1e3),
                                 st.floats(0, 1e3), st.just(WALL)),
    code=st.sampled_from(["REQUEST_TIMED_OUT", "NOT_LEADER_OR_FOLLOWER", "NETWORK_EXCEPTION",
                          "OUT_OF_ORDER_SEQUENCE_NUMBER", "MESSAGE_TOO_LARGE"]),
)  # fmt: skip
def test_no_java_observation_is_restart_class(
    pending: int,
    pending_seconds: float,
    failing_seconds: float,
    heartbeat: float,
    progress: float | None,
    splits: SplitsObserved | None,
    code: str,
) -> None:
    seen = producer(
        pending=pending, pending_seconds=pending_seconds, failing_seconds=failing_seconds,
        heartbeat_age_seconds=heartbeat, progress_age_seconds=progress, java=True,
        splits=splits, errors=(ErrorObserved(code, "t", 5, 1.0, 20.0, WALL - 20),),
    )  # fmt: skip
    result = evaluate(RoundEvidence(cluster(), [seen]), thresholds=T, now=100)
    assert result.producers[seen.key].verdict not in RESTART_CLASS
    assert result.pod.verdict not in RESTART_CLASS
