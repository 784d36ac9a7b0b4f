"""Callbacks never block the client's I/O: the lesson of incident S4.

Covered, against the real lab:
- a job's `on_delivery` callback that blocks does not stop delivery or the heartbeat:
  every message is still acknowledged, the telemetry `seq` keeps increasing, and the
  telemetry reports the stuck callback (`callbacks.pending`, `running_seconds`);
- the S4 pattern itself (a delivery callback doing a synchronous send + flush) does
  not deadlock: the job's callbacks run on the wrapper's callback thread;
- a callback still blocked at close makes close raise `CallbackError` (bounded) after
  every message was acknowledged; one that raised is reported at close, chained;
- the job's `error_cb` runs on the callback thread, never on the poll thread;
- the heartbeat contract the sidecar relies on: if something blocks the *poll* thread
  (here a `logger` handler, which confluent-kafka runs there), the telemetry file
  stops changing and deliveries stall while the process lives; it resumes once freed.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, Message

from hangwatch_lab import Lab
from hangwatch_pipeline import CallbackError, ProducerSettings, producer
from hangwatch_testing.waiting import stays, wait_for

from .producer_helpers import FAST, doc_where, read_doc

pytestmark = pytest.mark.usefixtures("producer_env")


class Gate:
    """A callback that blocks (on the first call only) until `open()`."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.opened = threading.Event()
        self.calls = 0
        self.threads: set[str] = set()

    def __call__(self, err: KafkaError | None, msg: Message) -> None:
        self.calls += 1
        self.threads.add(threading.current_thread().name)
        if self.calls == 1:
            self.entered.set()
            self.opened.wait(120)  # longer than every wait below: only open() ends it

    def open(self) -> None:
        self.opened.set()


def test_blocking_job_callback_keeps_delivery_and_heartbeat_going(lab: Lab) -> None:
    gate = Gate()
    try:
        with producer({"bootstrap.servers": lab.bootstrap}, FAST, on_delivery=gate) as p:
            assert p.telemetry_path is not None
            p.send("t", "first")
            assert gate.entered.wait(30), "the callback was never called"
            for i in range(300):
                p.send("t", f"value-{i}")
            wait_for(lambda: p.counters().delivered == 301, 30, "all 301 acknowledged")
            before = read_doc(p.telemetry_path)["seq"]
            doc = doc_where(p.telemetry_path, lambda d: d["seq"] >= before + 2, 30)
            assert doc["counters"]["delivered"] == 301
            assert doc["callbacks"]["pending"] == 301
            assert doc["callbacks"]["running_seconds"] > 1.0
            gate.open()
    finally:
        gate.open()
    assert gate.calls == 301
    assert gate.threads == {f"hangwatch-callbacks-{p.number}"}


def test_synchronous_send_inside_a_delivery_callback_does_not_deadlock(lab: Lab) -> None:
    resent: list[str] = []

    def resend_synchronously(err: KafkaError | None, msg: Message) -> None:
        if len(resent) < 3:  # what the S4 job did: send again and wait for it
            resent.append(f"again-{len(resent)}")
            p.send("t", resent[-1], on_delivery=resend_synchronously)
            p.flush(5)

    with producer({"bootstrap.servers": lab.bootstrap}, FAST) as p:
        p.send("t", "original", on_delivery=resend_synchronously)
        p.send("t", "original-2", on_delivery=resend_synchronously)
    assert len(resent) == 3
    assert (p.counters().enqueued, p.counters().delivered) == (5, 5)


def test_callback_still_blocked_at_close_raises_callback_error(lab: Lab) -> None:
    gate = Gate()
    settings = ProducerSettings(message_timeout_ms=3_000, callback_drain_timeout_seconds=0.5)
    try:
        with (
            pytest.raises(CallbackError, match=r"still pending after 0\.5 s"),
            producer({"bootstrap.servers": lab.bootstrap}, settings) as p,
        ):
            for i in range(5):
                p.send("t", f"value-{i}", on_delivery=gate)
        assert p.counters().delivered == 5
    finally:
        gate.open()


def test_callback_exception_is_raised_at_close(lab: Lab) -> None:
    def broken(err: KafkaError | None, msg: Message) -> None:
        raise RuntimeError("bug in the job's callback")

    with (
        pytest.raises(CallbackError, match="5 on_delivery callbacks raised") as caught,
        producer({"bootstrap.servers": lab.bootstrap}, FAST, on_delivery=broken) as p,
    ):
        for i in range(5):
            p.send("t", f"value-{i}")
    assert isinstance(caught.value.__cause__, RuntimeError)
    assert p.counters().delivered == 5


def test_job_error_callback_runs_off_the_poll_thread(lab: Lab) -> None:
    seen: list[tuple[str, str]] = []

    def on_error(err: KafkaError) -> None:
        seen.append((err.name(), threading.current_thread().name))

    lab.down(1)
    lab.down(2)
    lab.down(3)
    conf: dict[str, Any] = {"bootstrap.servers": lab.bootstrap, "error_cb": on_error}
    with producer(conf, FAST) as p:
        wait_for(lambda: seen, 10, "an error callback")
    assert {thread for _, thread in seen} == {f"hangwatch-callbacks-{p.number}"}


class BlockingHandler(logging.Handler):
    """A log handler that blocks once armed, until unblocked (a wedged log shipper)."""

    def __init__(self) -> None:
        super().__init__()
        self.armed = threading.Event()
        self.unblocked = threading.Event()
        self.blocking = threading.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if self.armed.is_set() and not self.unblocked.is_set():
            self.blocking.set()
            self.unblocked.wait(120)  # longer than every wait below: only set() ends it


def test_blocked_poll_thread_stops_the_heartbeat(lab: Lab, producer_env: Path) -> None:
    handler = BlockingHandler()
    client_log = logging.getLogger("tests.librdkafka")
    client_log.addHandler(handler)
    client_log.propagate = False
    client_log.setLevel(logging.DEBUG)
    conf = {"bootstrap.servers": lab.bootstrap, "logger": client_log, "debug": "msg"}
    try:
        with producer(conf, FAST) as p:
            assert p.telemetry_path is not None
            p.send("t", "before")
            p.flush()
            doc_where(p.telemetry_path, lambda d: d["stats"] is not None, 30)
            handler.armed.set()
            p.send("t", "during")  # its debug log line is served on the poll thread
            assert handler.blocking.wait(30)
            frozen = read_doc(p.telemetry_path)
            stays(lambda: read_doc(p.telemetry_path) == frozen, 2.5, "the frozen heartbeat")
            assert p.counters().delivered == 1  # the second report waits behind the block
            handler.unblocked.set()
            doc_where(p.telemetry_path, lambda d: d["seq"] > frozen["seq"], 30)
            wait_for(lambda: p.counters().delivered == 2, 30, "the second acknowledgement")
    finally:
        handler.unblocked.set()
        client_log.removeHandler(handler)
