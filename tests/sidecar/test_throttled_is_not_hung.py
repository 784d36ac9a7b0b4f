"""A producer a broker's quota throttles is slow, not hung: never producer_hung or
metadata_stale while throttling explains its wait (a restart meets the same quota).

Covers: messages waiting past the stall threshold with no delivery while the producer's
telemetry says a broker throttled it within its latest throttle time plus the stall
threshold -> healthy, the throttle in the evidence; the same wait once that time has
passed, or after the broker reported the throttling over (0 s) -> producer_hung as
before; a request of the pod's own connections unanswered for 7 s (the quota holding it)
is no broker_degraded finding while a producer's throttle explains it, and is one without;
the tracker reads the document's `throttle` (absent in older wrappers' documents);
any throttle report (hypothesis) never makes a producer's verdict restart-class while it
explains the wait.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from hangwatch.contracts import Verdict as V
from hangwatch_producer.wire import telemetry as wire
from hangwatch_sidecar.assessment import Thresholds
from hangwatch_sidecar.round import RoundEvidence
from hangwatch_sidecar.rules import evaluate
from hangwatch_sidecar.sockets.types import Pattern
from hangwatch_sidecar.tracking import ProducerTracker
from tests.sidecar.builders import cluster, connection, producer, socket_view

T = Thresholds(
    stall_seconds=5, heartbeat_seconds=15, metadata_max_age_seconds=60, election_grace_seconds=15
)
WALL = 1_800_000_000.0
WAITING = {"pending": 400, "pending_seconds": 9, "progress_age_seconds": 7.0,
           "awaiting_responses": 1}  # fmt: skip
"""Deliveries 7 s apart while requests wait on a broker: producer_hung without more."""


def test_a_throttled_wait_is_healthy_with_the_throttle_in_the_evidence() -> None:
    assert evaluate(
        RoundEvidence(cluster(), [producer(**WAITING)]), thresholds=T, now=100
    ).pod.verdict is (V.PRODUCER_HUNG)
    throttled = producer(**WAITING, throttle_age_seconds=3.0, throttle_seconds=4.2)
    result = evaluate(RoundEvidence(cluster(), [throttled]), thresholds=T, now=100)
    assert result.pod.verdict is V.HEALTHY, result.pod.reasons
    evidence = result.producers["producer-42-1"].evidence
    assert evidence["throttle_seconds"] == 4.2 and evidence["throttle_age_seconds"] == 3.0


def test_a_wait_past_the_throttle_or_after_it_ended_is_judged_as_before() -> None:
    long_past = producer(**WAITING, throttle_age_seconds=9.3, throttle_seconds=4.2)
    assert (
        evaluate(RoundEvidence(cluster(), [long_past]), thresholds=T, now=100).pod.verdict
        is V.PRODUCER_HUNG
    )
    ended = producer(**WAITING, throttle_age_seconds=1.0, throttle_seconds=0.0)
    assert (
        evaluate(RoundEvidence(cluster(), [ended]), thresholds=T, now=100).pod.verdict
        is V.PRODUCER_HUNG
    )


def test_a_request_the_quota_holds_is_no_broker_finding() -> None:
    held = socket_view(connection(pattern=Pattern.UNANSWERED, waiting_seconds=7.0))
    delivering = {"pending": 40, "pending_seconds": 2, "progress_age_seconds": 0.5}
    plain = evaluate(
        RoundEvidence(cluster(), [producer(**delivering)], sockets=held), thresholds=T, now=100
    )
    assert plain.pod.verdict is V.BROKER_DEGRADED, plain.pod.reasons
    throttled = producer(**delivering, throttle_age_seconds=1.0, throttle_seconds=4.2)
    result = evaluate(RoundEvidence(cluster(), [throttled], sockets=held), thresholds=T, now=100)
    assert result.pod.verdict is V.HEALTHY, result.pod.reasons
    longer = socket_view(connection(pattern=Pattern.UNANSWERED, waiting_seconds=12.0))
    past = evaluate(RoundEvidence(cluster(), [throttled], sockets=longer), thresholds=T, now=100)
    assert past.pod.verdict is V.BROKER_DEGRADED, past.pod.reasons  # longer than it explains


def _document(**changes: object) -> wire.TelemetryDocument:
    base = {"schema": 1, "kind": wire.KIND, "seq": 5, "ts": WALL, "counters": {"enqueued": 10}}
    return wire.from_builtins({**base, **changes})


def test_the_tracker_reads_the_throttle_and_documents_without_it() -> None:
    doc = _document(throttle={"count": 7, "last_ts": WALL - 2.5, "last_seconds": 4.2,
                              "broker": "b1:9092/1"})  # fmt: skip
    seen = ProducerTracker().observe("p", doc, True, now=50.0, wall_now=WALL)
    assert (seen.throttle_age_seconds, seen.throttle_seconds) == (2.5, 4.2)
    old = ProducerTracker().observe("p", _document(), True, now=50.0, wall_now=WALL)
    assert (old.throttle_age_seconds, old.throttle_seconds) == (None, 0.0)


@given(
    age=st.floats(0, 1e6, allow_nan=False),
    seconds=st.floats(0, 1e5, allow_nan=False),
    pending_seconds=st.floats(0, 1e6, allow_nan=False),
)
def test_while_a_throttle_explains_the_wait_no_restart_verdict(
    age: float, seconds: float, pending_seconds: float
) -> None:
    seen = producer(**{**WAITING, "pending_seconds": pending_seconds},
                    throttle_age_seconds=age, throttle_seconds=seconds)  # fmt: skip
    verdict = evaluate(RoundEvidence(cluster(), [seen]), thresholds=T, now=100).pod.verdict
    if seconds > 0 and age <= seconds + T.stall_seconds:
        assert verdict not in {V.PRODUCER_HUNG, V.METADATA_STALE}
