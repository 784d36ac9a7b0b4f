"""Writes the cluster refuses for a reason the next client meets again are named
`writes_rejected` (alert only), never restarted; errors that live in the client keep
their restart verdicts.

Covers (issue 29): a producer whose sends all fail with MSG_SIZE_TOO_LARGE while every
broker answers (was `metadata_stale`, restarted) -> writes_rejected naming the topic, the
error, how many, since when and the topic's limit; the same refusal while messages wait
answered (the S1 shape) and a failed SASL login while messages wait unanswered (the S2
shape) -> writes_rejected, not metadata_stale / producer_hung; S1's sticky not-leader
and idempotent-producer errors -> metadata_stale as before; a blocked poll loop (S4)
stays producer_hung; a refusal met once long ago, deliveries since -> healthy; a
refusal younger than the stall threshold while deliveries go on -> not yet; telemetry
written before per-topic errors (only `last_error`) still classifies; the pod's verdict
puts writes_rejected first; the debouncer takes it over at once (it replaces a restart
verdict in the same evaluation); the tracker reads per-topic errors and old documents.
"""

from __future__ import annotations

import pytest

from hangwatch.contracts import Verdict as V
from hangwatch_producer.wire import telemetry as wire
from hangwatch_sidecar.assessment import Thresholds
from hangwatch_sidecar.evidence import ErrorObserved
from hangwatch_sidecar.hysteresis import Debouncer
from hangwatch_sidecar.round import RoundEvidence
from hangwatch_sidecar.rules import evaluate
from hangwatch_sidecar.tracking import ProducerTracker
from tests.sidecar.builders import cluster, producer

T = Thresholds(
    stall_seconds=10, heartbeat_seconds=15, metadata_max_age_seconds=60, election_grace_seconds=15
)
WALL = 1_800_000_000.0


def met(code: str, *, topic: str = "orders", count: int = 784, first: float | None = 12.0,
        last: float = 0.5) -> ErrorObserved:  # fmt: skip
    return ErrorObserved(code, topic, count, last, first, None if first is None else WALL - first)


TOO_LARGE_FAILING = {
    "failed_total": 784,
    "failing_seconds": 12,
    "progress_age_seconds": None,
    "delivered_total": 0,
    "errors": (met("MSG_SIZE_TOO_LARGE"),),
}


def test_message_too_large_is_writes_rejected_never_metadata_stale() -> None:
    without_codes = producer(**{**TOO_LARGE_FAILING, "errors": ()})
    before = evaluate(RoundEvidence(cluster(), [without_codes]), thresholds=T, now=100)
    assert before.pod.verdict is V.METADATA_STALE  # what the code alone cannot tell
    result = evaluate(
        RoundEvidence(cluster(), [producer(**TOO_LARGE_FAILING)]), thresholds=T, now=100
    )
    assert result.pod.verdict is V.WRITES_REJECTED
    (reason,) = result.pod.reasons
    parts = (
        "topic orders", "MSG_SIZE_TOO_LARGE (MESSAGE_TOO_LARGE)", "784 times",
        "since 2027-01-15T07:59:48Z (12 s ago)", "max.message.bytes", "a restart cannot help",
    )  # fmt: skip
    for part in parts:
        assert part in reason, reason
    (evidence,) = result.producers["producer-42-1"].evidence["writes_rejected"]
    assert evidence["topic"] == "orders" and evidence["error"] == "MSG_SIZE_TOO_LARGE"


@pytest.mark.parametrize(
    ("code", "shape", "without"),
    [
        ("MSG_SIZE_TOO_LARGE", {"answered_age_seconds": 0.5}, V.METADATA_STALE),
        ("TOPIC_AUTHORIZATION_FAILED", {"answered_age_seconds": 0.5}, V.METADATA_STALE),
        ("_AUTHENTICATION", {"awaiting_responses": 0}, V.PRODUCER_HUNG),
        ("_UNKNOWN_TOPIC", {"answered_age_seconds": 0.5}, V.METADATA_STALE),
    ],
)
def test_a_refusal_outranks_the_restart_verdicts_its_symptoms_look_like(
    code: str, shape: dict[str, float], without: V
) -> None:
    stuck = {"pending": 100, "pending_seconds": 11, "progress_age_seconds": 40, **shape}
    assert (
        evaluate(RoundEvidence(cluster(), [producer(**stuck)]), thresholds=T, now=100).pod.verdict
        is without
    )
    refused = producer(**stuck, errors=(met(code, topic="" if code[0] == "_" else "orders"),))
    result = evaluate(RoundEvidence(cluster(), [refused]), thresholds=T, now=100)
    assert result.pod.verdict is V.WRITES_REJECTED
    assert code in result.pod.reasons[0]


@pytest.mark.parametrize(
    "code",
    [
        "NOT_LEADER_FOR_PARTITION",
        "OUT_OF_ORDER_SEQUENCE_NUMBER",
        "UNKNOWN_PRODUCER_ID",
        "INVALID_PRODUCER_EPOCH",
        "_MSG_TIMED_OUT",
    ],
)
def test_errors_that_live_in_the_client_keep_the_restart_verdict(code: str) -> None:
    failing = producer(**{**TOO_LARGE_FAILING, "errors": (met(code),)})
    assert (
        evaluate(RoundEvidence(cluster(), [failing]), thresholds=T, now=100).pod.verdict
        is V.METADATA_STALE
    )


def test_a_blocked_poll_loop_is_hung_whatever_it_met_before() -> None:
    blocked = producer(**TOO_LARGE_FAILING, heartbeat_age_seconds=20, pending=5)
    assert (
        evaluate(RoundEvidence(cluster(), [blocked]), thresholds=T, now=100).pod.verdict
        is V.PRODUCER_HUNG
    )


def test_a_refusal_long_past_with_deliveries_since_is_healthy() -> None:
    past = producer(errors=(met("MSG_SIZE_TOO_LARGE", count=1, first=600, last=600),))
    assert (
        evaluate(RoundEvidence(cluster(), [past]), thresholds=T, now=100).pod.verdict is V.HEALTHY
    )


def test_a_young_refusal_among_deliveries_waits_for_the_stall_threshold() -> None:
    young = producer(errors=(met("MSG_SIZE_TOO_LARGE", count=3, first=4, last=1),))
    assert (
        evaluate(RoundEvidence(cluster(), [young]), thresholds=T, now=100).pod.verdict is V.HEALTHY
    )
    held = producer(errors=(met("MSG_SIZE_TOO_LARGE", count=9, first=11, last=1),))
    assert (
        evaluate(RoundEvidence(cluster(), [held]), thresholds=T, now=100).pod.verdict
        is V.WRITES_REJECTED
    )


def test_old_telemetry_with_only_the_last_error_still_classifies() -> None:
    old = producer(**{**TOO_LARGE_FAILING, "errors": (met("MSG_SIZE_TOO_LARGE", topic="",
                                                           first=None),)})  # fmt: skip
    result = evaluate(RoundEvidence(cluster(), [old]), thresholds=T, now=100)
    assert result.pod.verdict is V.WRITES_REJECTED
    assert "the producer's connections refused" in result.pod.reasons[0]


def test_the_pod_names_a_refusal_before_another_producers_hang() -> None:
    hung = producer(key="a", pending=10, pending_seconds=40, progress_age_seconds=40)
    refused = producer(key="b", **TOO_LARGE_FAILING)
    result = evaluate(RoundEvidence(cluster(), [hung, refused]), thresholds=T, now=100)
    assert result.pod.verdict is V.WRITES_REJECTED
    assert result.producers["a"].verdict is V.PRODUCER_HUNG


def test_the_debouncer_takes_a_refusal_over_at_once() -> None:
    debouncer = Debouncer(hold=3)
    debouncer.update(V.HEALTHY, 1.0)
    assert debouncer.update(V.WRITES_REJECTED, 2.0) and debouncer.current is V.WRITES_REJECTED


def document(**changes: object) -> wire.TelemetryDocument:
    base: dict[str, object] = {
        "schema": 1, "kind": wire.KIND, "seq": 5, "ts": WALL,
        "counters": {"enqueued": 10, "failed": 10}, "topics": ["orders"],
        "last_error": {"code": "MSG_SIZE_TOO_LARGE", "reason": "Broker: Message size too large",
                       "ts": WALL - 2},
        "error_counts": {"MSG_SIZE_TOO_LARGE": 10},
    }  # fmt: skip
    return wire.from_builtins({**base, **changes})


def test_the_tracker_reads_per_topic_errors_and_old_documents() -> None:
    per_topic = document(errors=[{"code": "MSG_SIZE_TOO_LARGE", "topic": "orders", "count": 10,
                                  "first_ts": WALL - 30, "last_ts": WALL - 2}])  # fmt: skip
    seen = ProducerTracker().observe("p", per_topic, True, now=50.0, wall_now=WALL)
    assert seen.errors == (ErrorObserved("MSG_SIZE_TOO_LARGE", "orders", 10, 2.0, 30.0, WALL - 30),)
    old = ProducerTracker().observe("p", document(), True, now=50.0, wall_now=WALL)
    assert old.errors == (ErrorObserved("MSG_SIZE_TOO_LARGE", "", 10, 2.0),)


# A topic the cluster does not have (automatic creation off): librdkafka names no error
# for topic.metadata.propagation.max.ms (30 s), its messages wait while every broker
# answers - the shape of S1's stale metadata - but the sidecar's own metadata, fetched
# after the wait began, says the topic does not exist: the next producer waits the same.
WAITING = {"pending": 100, "pending_seconds": 11, "progress_age_seconds": None,
           "delivered_total": 0, "answered_age_seconds": 0.5}  # fmt: skip


@pytest.mark.parametrize(
    "told",
    [
        {"absent_topics": frozenset({"t"})},  # asked by name: UNKNOWN_TOPIC_OR_PART
        {"listed_all_topics": True, "listed_topics": frozenset({"other"})},  # not listed
    ],
)
def test_a_topic_the_cluster_does_not_have_is_writes_rejected(told: dict[str, object]) -> None:
    assert (
        evaluate(RoundEvidence(cluster(), [producer(**WAITING)]), thresholds=T, now=100).pod.verdict
        is V.METADATA_STALE
    )  # without the cluster's word on the topic
    result = evaluate(
        RoundEvidence(cluster(metadata_age_seconds=3.0, **told), [producer(**WAITING)]),
        thresholds=T,
        now=100,
    )
    assert result.pod.verdict is V.WRITES_REJECTED
    (reason,) = result.pod.reasons
    for part in ("topic t", "UNKNOWN_TOPIC_OR_PART", "100 messages", "a restart cannot help"):
        assert part in reason, reason
    (evidence,) = result.producers["producer-42-1"].evidence["writes_rejected"]
    assert evidence["topic"] == "t" and evidence["error"] == "UNKNOWN_TOPIC_OR_PART"


@pytest.mark.parametrize(
    ("told", "shape"),
    [
        # metadata fetched before the wait began: the topic may have been created since
        ({"absent_topics": frozenset({"t"}), "metadata_age_seconds": 20.0}, {}),
        # no metadata age: no metadata to speak for the topic
        ({"absent_topics": frozenset({"t"})}, {}),
        # asked by name for other topics only: this one is not known either way
        ({"absent_topics": frozenset({"other"}), "metadata_age_seconds": 3.0}, {}),
        # listed every topic, and the producer's is there
        (
            {
                "listed_all_topics": True,
                "listed_topics": frozenset({"t"}),
                "metadata_age_seconds": 3,
            },
            {},
        ),
    ],
)
def test_the_cluster_must_say_the_topic_is_absent_after_the_wait_began(
    told: dict[str, object], shape: dict[str, object]
) -> None:
    result = evaluate(
        RoundEvidence(cluster(**told), [producer(**WAITING, **shape)]), thresholds=T, now=100
    )
    assert result.pod.verdict is V.METADATA_STALE, result.pod.reasons


def test_an_absent_topic_among_deliveries_is_not_judged() -> None:
    """Messages for the absent topic wait, another topic's are delivered: no stall, and a
    producer that keeps delivering is healthy (its absent topic fails by itself later)."""
    moving = {**WAITING, "progress_age_seconds": 1.0, "delivered_total": 500}
    told = cluster(absent_topics=frozenset({"t"}), metadata_age_seconds=3.0)
    assert (
        evaluate(RoundEvidence(told, [producer(**moving)]), thresholds=T, now=100).pod.verdict
        is V.HEALTHY
    )


def test_an_unknown_topic_error_is_a_refusal_when_the_cluster_lacks_the_topic_too() -> None:
    """librdkafka fails the waiting messages with UNKNOWN_TOPIC_OR_PART once
    topic.metadata.propagation.max.ms has passed: the code alone does not tell (a topic
    being created), the cluster's metadata does. Nothing waits any more and the sends
    fail while every broker answers - the shape metadata_stale would take."""
    unknown = met("UNKNOWN_TOPIC_OR_PART", topic="t", count=1501, first=2.0)
    failing = {"pending": 0, "pending_seconds": 0, "progress_age_seconds": None,
               "delivered_total": 0, "failed_total": 1501, "failing_seconds": 11,
               "errors": (unknown,)}  # fmt: skip
    unsure = evaluate(RoundEvidence(cluster(), [producer(**failing)]), thresholds=T, now=100)
    assert unsure.pod.verdict is V.METADATA_STALE  # the cluster may have the topic
    told = cluster(absent_topics=frozenset({"t"}), metadata_age_seconds=25.0)
    result = evaluate(RoundEvidence(told, [producer(**failing)]), thresholds=T, now=100)
    assert result.pod.verdict is V.WRITES_REJECTED
    (reason,) = result.pod.reasons
    assert "UNKNOWN_TOPIC_OR_PART (UNKNOWN_TOPIC_OR_PARTITION)" in reason, reason
    assert "not in the cluster's metadata either" in reason and "create it" in reason
