"""The delivery ledger on its own: per-producer at-least-once accounting, without Kafka.

Covered (librdkafka's own `KafkaError` and `Message` objects, as the poll thread
hands them over; a real lock; the wall clock replaced by a counter to check stamps):
- acknowledged reports count as delivered and stamp `last_delivery_ts`;
- failed reports count as failed; the first `max_recorded_errors` are kept as
  `topic[partition]: code: reason` (a message without a partition yet says so),
  `error_counts` and `last_error` follow every error, reasons are scrubbed of secrets;
- each (topic, code) is remembered with its count and first and last time (a client
  error under topic ""), bounded, the least recently met forgotten first;
- a client error is counted and logged but fails no message;
- `withdraw` undoes an `enqueue` librdkafka refused; a refused message's topic is
  not listed, an accepted one's is;
- the verdict: any failed message fails the task even once everything settled; an
  unsettled wait fails it naming the timeout; otherwise the task is proven delivered;
- errors wait to be logged in order, bounded (the oldest dropped, still counted);
- `enqueue`/`withdraw` (sends from the job's and the callback thread) serialize on
  the lock the owner passes in;
- property: any sequence of sends, refusals, reports and client errors keeps
  enqueued = delivered + failed + outstanding, bounded recorded errors, counts per
  code that add up, and no secret in any recorded text;
- the error-log throttle: one line per code per interval, with the repeats it held back.
"""

from __future__ import annotations

import functools
import itertools
import threading
from typing import Any

from confluent_kafka import KafkaError, Message
from hypothesis import given
from hypothesis import strategies as st

from hangwatch_producer.ledger import (
    MAX_ERROR_EVENTS,
    MAX_ERRORS_SEEN,
    DeliveryLedger,
    ErrorEvent,
    ErrorLogThrottle,
    ErrorSeen,
    ThrottleSeen,
)
from hangwatch_producer.secrets import REDACTED
from hangwatch_producer.telemetry import MAX_STRING, scrub

SECRET = "hunter2hunter2"
CODES = (
    KafkaError._MSG_TIMED_OUT,
    KafkaError._TRANSPORT,
    KafkaError._PURGE_QUEUE,
    KafkaError.NOT_ENOUGH_REPLICAS,
    KafkaError.TOPIC_AUTHORIZATION_FAILED,
    KafkaError.MSG_SIZE_TOO_LARGE,
)


def ledger(max_recorded_errors: int = 3, **overrides: Any) -> DeliveryLedger:
    clock = itertools.count(1_000)
    options: dict[str, Any] = {
        "lock": threading.Lock(),
        "clock": lambda: float(next(clock)),
        "scrub": functools.partial(scrub, secrets=[SECRET]),
        "max_recorded_errors": max_recorded_errors,
        **overrides,
    }
    return DeliveryLedger(**options)


def sent(book: DeliveryLedger, topic: str = "t", count: int = 1) -> None:
    for _ in range(count):
        book.enqueue()
        book.taken(topic)


def test_acknowledged_reports_count_as_delivered() -> None:
    book = ledger()
    sent(book, count=3)
    assert book.last_delivery_ts is None
    book.record_report(None, Message(topic="t", partition=0))
    book.record_report(None, Message(topic="t", partition=1))
    assert (book.delivered, book.failed, book.outstanding) == (2, 0, 1)
    assert book.last_delivery_ts == 1_001.0  # the second stamp of the clock
    counters = book.counters(in_queue=1)
    assert (counters.enqueued, counters.delivered, counters.in_queue) == (3, 2, 1)
    assert counters.unacknowledged == 1
    assert book.last_error is None and book.errors == [] and book.error_counts == {}


def test_failed_reports_keep_the_first_errors_and_count_every_one() -> None:
    book = ledger(max_recorded_errors=2)
    sent(book, count=4)
    timed_out = KafkaError(KafkaError._MSG_TIMED_OUT)
    book.record_report(timed_out, Message(topic="t", partition=2))
    book.record_report(timed_out, Message(topic="t", partition=-1))
    book.record_report(KafkaError(KafkaError._PURGE_QUEUE), Message(topic="u", partition=0))
    assert (book.failed, book.delivered, book.outstanding) == (3, 0, 1)
    assert book.errors == [
        "t[2]: _MSG_TIMED_OUT: Local: Message timed out",
        "t (no partition yet): _MSG_TIMED_OUT: Local: Message timed out",
    ]
    assert book.error_counts == {"_MSG_TIMED_OUT": 2, "_PURGE_QUEUE": 1}
    assert book.last_error == {
        "code": "_PURGE_QUEUE", "reason": "Local: Purged in queue", "ts": 1_002.0, "fatal": False,
    }  # fmt: skip
    assert book.last_delivery_ts is None


def test_errors_are_remembered_per_topic_and_code_with_first_and_last_time() -> None:
    book = ledger()
    sent(book, count=3)
    too_large = KafkaError(KafkaError.MSG_SIZE_TOO_LARGE)
    book.record_report(too_large, Message(topic="orders", partition=0))
    book.record_client_error(KafkaError(KafkaError._AUTHENTICATION))
    book.record_report(too_large, Message(topic="orders", partition=1))
    assert book.errors_seen == {
        ("orders", "MSG_SIZE_TOO_LARGE"): ErrorSeen("MSG_SIZE_TOO_LARGE", "orders", 2, 1_000.0,
                                                    1_002.0),
        ("", "_AUTHENTICATION"): ErrorSeen("_AUTHENTICATION", "", 1, 1_001.0, 1_001.0),
    }  # fmt: skip
    for n in range(MAX_ERRORS_SEEN):
        book.record_report(too_large, Message(topic=f"t{n}", partition=0))
    assert len(book.errors_seen) == MAX_ERRORS_SEEN
    assert ("", "_AUTHENTICATION") not in book.errors_seen  # the least recently met


def test_reasons_are_scrubbed_and_bounded() -> None:
    book = ledger()
    sent(book)
    reason = f"SASL authentication failed with {SECRET} " + "x" * 1000
    book.record_report(
        KafkaError(KafkaError._TRANSPORT, reason, fatal=True), Message(topic="t", partition=0)
    )
    assert book.last_error is not None
    assert SECRET not in book.last_error["reason"] and REDACTED in book.last_error["reason"]
    assert len(book.last_error["reason"]) == MAX_STRING and book.last_error["fatal"] is True
    assert SECRET not in book.errors[0]


def test_a_client_error_fails_no_message() -> None:
    book = ledger()
    sent(book)
    book.record_client_error(KafkaError(KafkaError._ALL_BROKERS_DOWN))
    assert (book.failed, book.outstanding, book.errors) == (0, 1, [])
    assert book.error_counts == {"_ALL_BROKERS_DOWN": 1}
    assert book.last_error is not None and book.last_error["code"] == "_ALL_BROKERS_DOWN"
    assert book.take_error_events() == [
        ErrorEvent("_ALL_BROKERS_DOWN", "Local: All broker connections are down", client=True)
    ]


def test_withdraw_undoes_a_refused_message() -> None:
    book = ledger()
    sent(book, "accepted")
    book.enqueue()
    book.withdraw()  # librdkafka refused the message to "refused": no report will come
    book.queue_full_wait()
    assert (book.enqueued, book.outstanding) == (1, 1)
    assert book.topics == {"accepted"}
    assert book.counters(in_queue=0).queue_full_waits == 1


def test_the_at_least_once_verdict() -> None:
    book = ledger()
    assert book.failure_reason(settled=True, timeout_seconds=65) is None
    sent(book, count=2)
    assert book.failure_reason(settled=False, timeout_seconds=2) == "not acknowledged within 2 s"
    assert book.failure_reason(settled=False, timeout_seconds=0.5) == (
        "not acknowledged within 0.5 s"
    )
    book.record_report(None, Message(topic="t", partition=0))
    book.record_report(KafkaError(KafkaError._MSG_TIMED_OUT), Message(topic="t", partition=0))
    assert book.outstanding == 0
    assert book.failure_reason(settled=True, timeout_seconds=65) == "delivery failed"
    assert book.failure_reason(settled=False, timeout_seconds=65) == "delivery failed"


def test_errors_wait_to_be_logged_in_order_and_bounded() -> None:
    book = ledger()
    for i in range(MAX_ERROR_EVENTS + 5):
        code = CODES[i % 2]
        sent(book)
        book.record_report(KafkaError(code), Message(topic="t", partition=0))
    events = book.take_error_events()
    assert len(events) == MAX_ERROR_EVENTS
    assert events[0].code == KafkaError(CODES[5 % 2]).name()  # the 5 oldest were dropped
    assert not any(e.client for e in events)
    assert book.take_error_events() == []
    assert sum(book.error_counts.values()) == book.failed == MAX_ERROR_EVENTS + 5


def test_sends_from_several_threads_serialize_on_the_owners_lock() -> None:
    lock = threading.Lock()
    book = ledger(lock=lock)
    with lock:  # another send holds it: this one waits instead of racing its increment
        sender = threading.Thread(target=book.enqueue)
        sender.start()
        sender.join(0.3)
        assert sender.is_alive() and book.enqueued == 0
    sender.join(5)
    assert not sender.is_alive() and book.enqueued == 1
    with lock:
        refusal = threading.Thread(target=book.withdraw)
        refusal.start()
        refusal.join(0.3)
        assert refusal.is_alive() and book.enqueued == 1
    refusal.join(5)
    assert book.enqueued == 0


C_TEXT = st.text(st.characters(exclude_characters="\x00", exclude_categories=("Cs",)), max_size=400)
"""Text as librdkafka hands it over: UTF-8 (a lone surrogate cannot even be put into a
KafkaError)."""
"""Reasons librdkafka can carry (C strings: no NUL), any length."""

operation = st.one_of(
    st.tuples(st.just("send"), st.text(max_size=300)),
    st.tuples(st.just("refuse"), st.text(max_size=5)),
    st.tuples(st.just("ack"), st.integers(-1, 5)),
    st.tuples(
        st.sampled_from(["fail", "client"]),
        st.tuples(st.sampled_from(CODES), C_TEXT, st.integers(-1, (1 << 31) - 1)),
    ),
)


@given(ops=st.lists(operation, max_size=60), max_recorded=st.integers(1, 5))
def test_any_sequence_keeps_the_books_balanced(
    ops: list[tuple[str, Any]], max_recorded: int
) -> None:
    book = ledger(max_recorded_errors=max_recorded)
    client_errors = 0
    for kind, arg in ops:
        if kind == "send":
            sent(book, arg)
        elif kind == "refuse":
            book.enqueue()
            book.withdraw()
        elif book.outstanding <= 0 and kind in ("ack", "fail"):
            continue  # librdkafka reports only messages it took
        elif kind == "ack":
            book.record_report(None, Message(topic="t", partition=arg))
        else:
            code, reason, partition = arg
            err = KafkaError(code, f"{reason} {SECRET}")
            if kind == "client":
                client_errors += 1
                book.record_client_error(err)
            else:
                book.record_report(err, Message(topic="t", partition=partition))
    assert book.enqueued == book.delivered + book.failed + book.outstanding
    assert book.outstanding >= 0
    assert len(book.errors) == min(book.failed, max_recorded)
    assert sum(book.error_counts.values()) == book.failed + client_errors
    texts = [*book.errors, *(e.reason for e in book.take_error_events())]
    if book.last_error is not None:
        texts.append(book.last_error["reason"])
    assert all(SECRET not in text for text in texts)
    verdict = book.failure_reason(settled=book.outstanding == 0, timeout_seconds=1)
    assert (verdict is None) == (book.failed == 0 and book.outstanding == 0)


def test_error_log_throttle_one_line_per_code_and_interval() -> None:
    throttle = ErrorLogThrottle(60.0)
    assert throttle.admit("_TRANSPORT", 100.0) == 0
    assert throttle.admit("_TRANSPORT", 110.0) is None
    assert throttle.admit("_TRANSPORT", 159.9) is None
    assert throttle.admit("_MSG_TIMED_OUT", 120.0) == 0  # codes are independent
    assert throttle.admit("_TRANSPORT", 160.0) == 2  # the two held back since the last line
    assert throttle.admit("_TRANSPORT", 161.0) is None
    assert throttle.admit("_TRANSPORT", 300.0) == 1


def test_a_send_refused_at_once_counts_its_error_on_the_topic_not_a_failed_message() -> None:
    """librdkafka refuses a send to a topic it knows is forbidden in `produce()` itself:
    no message is queued and no report follows, yet the error is met on that topic (the
    sidecar names it writes_rejected from the telemetry's `errors`)."""
    book = ledger()
    forbidden = KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED)
    for _ in range(3):
        book.enqueue()
        book.withdraw()  # as send() does when produce() raises
        book.record_refused(forbidden, "orders")
    assert (book.enqueued, book.failed, book.outstanding, book.errors) == (0, 0, 0, [])
    assert book.errors_seen == {
        ("orders", "TOPIC_AUTHORIZATION_FAILED"): ErrorSeen(
            "TOPIC_AUTHORIZATION_FAILED", "orders", 3, 1_000.0, 1_002.0
        )
    }
    assert book.error_counts == {"TOPIC_AUTHORIZATION_FAILED": 3}


def test_throttling_is_remembered_with_its_latest_time_and_its_end() -> None:
    book = ledger()
    assert book.throttle is None
    book.record_throttle("broker1:9092/1", 2.5)
    book.record_throttle("broker1:9092/1", 4.0)
    assert book.throttle == ThrottleSeen(2, 1_001.0, 4.0, "broker1:9092/1")
    book.record_throttle("broker1:9092/1", 0.0)  # librdkafka's report that it stopped
    assert book.throttle == ThrottleSeen(2, 1_002.0, 0.0, "broker1:9092/1")
