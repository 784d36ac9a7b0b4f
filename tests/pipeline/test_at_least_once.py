"""At-least-once per task: the producer block succeeds only if every message was acknowledged.

Covered, against the real lab:
- a healthy cluster: every message acknowledged, counted, and stored by the brokers;
- every broker down: leaving the block raises `DeliveryFailed` with counts and the
  first errors, once the message timeout has run out (`_MSG_TIMED_OUT`);
- every broker blackholed in the kernel: the bounded flush gives up after its timeout
  and before any message timed out, reporting the messages as unacknowledged; nothing
  is left running;
- a full local queue (`BufferError`) is waited out, not dropped; a queue that stays
  full raises `DeliveryFailed` after `queue_full_timeout_seconds`, not the message
  timeout;
- a leader election and transient NOT_LEADER errors are ridden out without loss;
- an exception inside the block purges, propagates unchanged, and cleans up.
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace
from pathlib import Path

import pytest

from hangwatch_lab import Lab
from hangwatch_pipeline import DeliveryFailed, ProducerSettings, producer

from .producer_helpers import FAST, stored_messages

pytestmark = pytest.mark.usefixtures("producer_env")


def test_every_message_is_acknowledged_and_stored(lab: Lab) -> None:
    with producer({"bootstrap.servers": lab.bootstrap}, FAST) as p:
        for i in range(2000):
            p.send("t", f"value-{i}", key=str(i))
    counters = p.counters()
    assert (counters.enqueued, counters.delivered, counters.failed) == (2000, 2000, 0)
    assert counters.unacknowledged == 0
    assert stored_messages(lab, "t", 3) == 2000


def test_cluster_down_makes_the_block_raise_with_counts(lab: Lab) -> None:
    for broker in (1, 2, 3):
        lab.down(broker)
    started = time.monotonic()
    with (
        pytest.raises(DeliveryFailed) as caught,
        producer({"bootstrap.servers": lab.bootstrap}, FAST) as p,
    ):
        for i in range(50):
            p.send("t", f"value-{i}")
    elapsed = time.monotonic() - started
    failure = caught.value
    assert failure.counters.enqueued == 50
    assert failure.counters.delivered == 0
    assert failure.counters.failed + failure.counters.unacknowledged == 50
    assert failure.errors and "_MSG_TIMED_OUT" in failure.errors[0]
    assert "of 50 messages" in str(failure) and "\n" not in str(failure)
    assert elapsed >= FAST.message_timeout_ms / 1000  # after the message timeout


@pytest.mark.usefixtures("kernel_faults")
def test_blackholed_cluster_gives_up_at_the_flush_timeout(lab: Lab, producer_env: Path) -> None:
    settings = ProducerSettings(message_timeout_ms=30_000, flush_timeout_seconds=2.0)
    with (
        pytest.raises(DeliveryFailed, match=r"not acknowledged within 2 s") as caught,
        producer({"bootstrap.servers": lab.bootstrap}, settings) as p,
    ):
        p.send("t", "warm-up")
        p.flush()
        for broker in (1, 2, 3):
            lab.blackhole(broker)
        for i in range(100):
            p.send("t", f"value-{i}")
        started = time.monotonic()
    assert time.monotonic() - started >= settings.flush_timeout_seconds
    counters = caught.value.counters
    assert counters.enqueued == 101 and counters.delivered == 1
    assert counters.failed + counters.unacknowledged == 100
    # it gave up at the flush timeout, before any message's own (30 s) timeout ran out
    assert not any("_MSG_TIMED_OUT" in e for e in caught.value.errors), caught.value.errors
    assert not list(producer_env.iterdir()), "telemetry file removed even on failure"


def test_full_local_queue_is_waited_out_not_dropped(lab: Lab) -> None:
    conf = {"bootstrap.servers": lab.bootstrap, "queue.buffering.max.messages": 20}
    with producer(conf, FAST) as p:
        for i in range(3000):
            p.send("t", f"value-{i}")
    counters = p.counters()
    assert counters.queue_full_waits > 0
    assert (counters.delivered, counters.failed) == (3000, 0)
    assert stored_messages(lab, "t", 3) == 3000


def test_queue_that_stays_full_raises_in_bounded_time(lab: Lab) -> None:
    for broker in (1, 2, 3):
        lab.down(broker)
    settings = replace(FAST, message_timeout_ms=30_000, queue_full_timeout_seconds=1.0)
    conf = {"bootstrap.servers": lab.bootstrap, "queue.buffering.max.messages": 10}
    started = time.monotonic()
    with (
        pytest.raises(DeliveryFailed, match="local producer queue stayed full for 1 s"),
        producer(conf, settings) as p,
    ):
        for i in range(100):
            p.send("t", f"value-{i}")
    assert time.monotonic() - started >= 1.0


def test_leader_election_and_not_leader_errors_are_ridden_out(lab: Lab) -> None:
    with producer({"bootstrap.servers": lab.bootstrap}, FAST) as p:
        for i in range(200):
            p.send("t", f"before-{i}")
        p.flush()
        lab.request_errors("produce", "NOT_LEADER_FOR_PARTITION", 5)
        lab.election("t", 1.0)
        for i in range(200):
            p.send("t", f"during-{i}")
    assert (p.counters().delivered, p.counters().failed) == (400, 0)
    assert stored_messages(lab, "t", 3) == 400


def test_exception_inside_the_block_purges_and_propagates(
    lab: Lab, producer_env: Path, caplog: pytest.LogCaptureFixture
) -> None:
    for broker in (1, 2, 3):
        lab.down(broker)
    settings = replace(FAST, message_timeout_ms=120_000)
    with (
        caplog.at_level(logging.WARNING, logger="hangwatch_producer"),
        pytest.raises(ValueError, match="job bug"),
        producer({"bootstrap.servers": lab.bootstrap}, settings) as p,
    ):
        for i in range(10):
            p.send("t", f"value-{i}")
        raise ValueError("job bug")
    assert p.counters().failed == 10  # purged: reported, not lost
    # the reports are the purge's, not the (2-minute) message timeout's
    codes = {getattr(r, "code", None) for r in caplog.records}
    assert "_PURGE_QUEUE" in codes and "_MSG_TIMED_OUT" not in codes, codes
    assert not list(producer_env.iterdir())
