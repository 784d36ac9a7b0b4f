"""The snapshot telemetry is built from: pure assembly, read back by the sidecar's decoder.

Covered, without Kafka (a real ledger fed librdkafka's own error and message objects):
- `build_snapshot` takes the fixed facts, the ledger's numbers (with `unacknowledged`),
  the callback status and the times it is given, and copies what the poll thread
  keeps changing (later records do not alter a snapshot taken before);
- a snapshot encoded by `hangwatch_producer.telemetry.encode_document` decodes with
  the sidecar's reader (`hangwatch_producer.wire.telemetry.decode`) to the same numbers;
- property: whatever a ledger recorded (any topics, reasons, codes, counts) and any
  callback status, the encoded document fits the size bound and decodes.
"""

from __future__ import annotations

import functools
import threading
from typing import Any

from confluent_kafka import KafkaError, Message
from hypothesis import given, settings
from hypothesis import strategies as st

from hangwatch_producer.ledger import DeliveryLedger
from hangwatch_producer.snapshot import CallbackStatus, ProducerFacts, build_snapshot
from hangwatch_producer.telemetry import encode_document, scrub
from hangwatch_producer.wire import telemetry as wire

FACTS = ProducerFacts(
    identity={"pod": "exec-1", "pid": 7, "producer": 2, "client_id": "c", "task": None},
    config={"acks": "all", "sasl.password": "[redacted]"},
    wrapper={"version": "0.1.0", "flush_timeout_seconds": 65.0},
    bootstrap=["10.0.0.1:9092", "10.0.0.2:9092"],
    started_ts=1_700_000_000.0,
    interval_seconds=1.0,
)
IDLE = CallbackStatus(pending=0, running_seconds=None, completed=0, errors=0)


def new_ledger() -> DeliveryLedger:
    return DeliveryLedger(
        lock=threading.Lock(),
        clock=lambda: 1_700_000_005.0,
        scrub=functools.partial(scrub, secrets=[]),
        max_recorded_errors=10,
    )


def snapshot_of(book: DeliveryLedger, callbacks: CallbackStatus = IDLE, **times: Any) -> Any:
    return build_snapshot(
        FACTS,
        seq=times.get("seq", 3),
        state="running",
        counters=book.counters(in_queue=book.outstanding),
        ledger=book,
        callbacks=callbacks,
        ts=times.get("ts", 1_700_000_010.0),
        monotonic=times.get("monotonic", 55.5),
        stats_received_ts=times.get("stats_received_ts"),
    )


def test_snapshot_takes_facts_numbers_and_times() -> None:
    book = new_ledger()
    for topic in ("a", "b", "a"):
        book.enqueue()
        book.taken(topic)
    book.record_report(None, Message(topic="a", partition=0))
    book.record_report(KafkaError(KafkaError._MSG_TIMED_OUT), Message(topic="b", partition=1))
    stuck = CallbackStatus(pending=2, running_seconds=4.5, completed=1, errors=1)
    snap = snapshot_of(book, stuck, seq=9, stats_received_ts=1_700_000_009.5)
    assert (snap.seq, snap.ts, snap.monotonic, snap.state) == (9, 1_700_000_010.0, 55.5, "running")
    assert snap.stats_received_ts == 1_700_000_009.5
    assert (snap.started_ts, snap.interval_seconds) == (FACTS.started_ts, 1.0)
    assert (snap.identity, snap.config, snap.wrapper) == (
        FACTS.identity,
        FACTS.config,
        FACTS.wrapper,
    )
    assert snap.bootstrap == FACTS.bootstrap
    assert snap.counters == {
        "enqueued": 3, "delivered": 1, "failed": 1, "in_queue": 1,
        "queue_full_waits": 0, "unacknowledged": 1,
    }  # fmt: skip
    assert sorted(snap.topics) == ["a", "b"]
    assert snap.last_delivery_ts == 1_700_000_005.0
    assert snap.last_error == book.last_error and snap.error_counts == {"_MSG_TIMED_OUT": 1}
    assert snap.callbacks == {"pending": 2, "running_seconds": 4.5, "completed": 1, "errors": 1}


def test_later_records_do_not_change_a_snapshot() -> None:
    book = new_ledger()
    book.enqueue()
    book.taken("a")
    snap = snapshot_of(book)
    book.enqueue()
    book.taken("later")
    book.record_client_error(KafkaError(KafkaError._TRANSPORT))
    assert snap.topics == ["a"] and snap.error_counts == {} and snap.last_error is None
    assert snap.counters["enqueued"] == 1


def test_the_sidecars_reader_decodes_what_the_snapshot_says() -> None:
    book = new_ledger()
    for _ in range(5):
        book.enqueue()
        book.taken("t")
    for _ in range(3):
        book.record_report(None, Message(topic="t", partition=0))
    book.record_report(
        KafkaError(KafkaError.NOT_ENOUGH_REPLICAS, fatal=False), Message(topic="t", partition=2)
    )
    stuck = CallbackStatus(pending=1, running_seconds=12.25, completed=3, errors=0)
    doc = wire.decode(encode_document(snapshot_of(book, stuck), None, 16_384))
    assert (doc.seq, doc.state, doc.detail) == (3, "running", "full")
    assert (doc.counters.enqueued, doc.counters.delivered, doc.counters.failed) == (5, 3, 1)
    assert doc.counters.unacknowledged == 1
    assert doc.callbacks.pending == 1 and doc.callbacks.running_seconds == 12.25
    assert doc.last_error is not None and doc.last_error.code == "NOT_ENOUGH_REPLICAS"
    assert doc.error_counts == {"NOT_ENOUGH_REPLICAS": 1}
    assert doc.topics == ["t"] and doc.bootstrap == FACTS.bootstrap
    assert doc.identity.pod == "exec-1" and doc.stats is None


TEXT = st.text(st.characters(exclude_characters="\x00", exclude_categories=("Cs",)), max_size=600)
"""Error reasons as librdkafka hands them over: UTF-8 text (a lone surrogate cannot even
be put into a KafkaError)."""
CODES = st.sampled_from(
    [KafkaError._MSG_TIMED_OUT, KafkaError._TRANSPORT, KafkaError.MSG_SIZE_TOO_LARGE]
)


@settings(max_examples=60)
@given(
    topics=st.lists(TEXT, max_size=150),
    failures=st.lists(st.tuples(CODES, TEXT), max_size=30),
    acknowledged=st.integers(0, 200),
    callbacks=st.builds(
        CallbackStatus,
        pending=st.integers(0, 1 << 40),
        running_seconds=st.none() | st.floats(0, 1e9),
        completed=st.integers(0, 1 << 40),
        errors=st.integers(0, 1 << 40),
    ),
)
def test_any_ledger_state_encodes_within_bounds_and_decodes(
    topics: list[str],
    failures: list[tuple[int, str]],
    acknowledged: int,
    callbacks: CallbackStatus,
) -> None:
    book = new_ledger()
    for topic in topics:
        book.enqueue()
        book.taken(topic)
    for _ in range(acknowledged + len(failures)):
        book.enqueue()
    for _ in range(acknowledged):
        book.record_report(None, Message(topic="t", partition=0))
    for code, reason in failures:
        book.record_report(KafkaError(code, reason), Message(topic="t", partition=0))
        book.record_client_error(KafkaError(code, reason))
    data = encode_document(snapshot_of(book, callbacks), None, 16_384)
    doc = wire.decode(data)
    assert len(data) <= 16_384
    assert doc.counters.enqueued == len(topics) + acknowledged + len(failures)
    assert doc.counters.failed == len(failures) and doc.callbacks.pending == callbacks.pending
    assert doc.topic_count == len(set(topics))
