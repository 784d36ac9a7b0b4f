"""The issue's case on the lab's real Apache Kafka: the wrapper writes 1 KiB records to a
topic whose max.message.bytes is 200; every delivery fails with MSG_SIZE_TOO_LARGE, the
telemetry it writes names the topic and the code with its count and first time, and the
sidecar's tracker and verdict engine make it `writes_rejected` - never `metadata_stale`
(the restart the issue saw) - with a reason naming the topic, the error and the limit.
Without the per-topic errors (the same document with `errors` removed: an older wrapper)
the `last_error` still classifies; without any error code the same failures are
`metadata_stale`, as the issue saw.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest
from confluent_kafka import admin
from confluent_kafka.cimpl import NewTopic

from hangwatch.contracts import Verdict as V
from hangwatch_lab import Lab
from hangwatch_producer import DeliveryFailed, ProducerSettings, producer
from hangwatch_producer.wire import telemetry as wire
from hangwatch_sidecar.assessment import Thresholds
from hangwatch_sidecar.round import RoundEvidence
from hangwatch_sidecar.rules import evaluate
from hangwatch_sidecar.tracking import ProducerTracker
from tests.sidecar.builders import cluster

pytestmark = pytest.mark.xdist_group("kafka-engine")
TOPIC = "small-records"


@pytest.fixture(scope="module")
def bootstrap() -> Iterator[str]:
    with Lab(brokers=1, topics={}, engine="kafka") as lab:
        client = admin.AdminClient({"bootstrap.servers": lab.bootstrap})
        topic = NewTopic(TOPIC, 1, 1, config={"max.message.bytes": "200"})
        client.create_topics([topic])[TOPIC].result(60)
        yield lab.bootstrap


def test_message_too_large_is_writes_rejected_naming_the_topic(
    bootstrap: str, tmp_path: Path
) -> None:
    settings = ProducerSettings(telemetry_dir=str(tmp_path), message_timeout_ms=10_000)
    tracker = ProducerTracker()
    with pytest.raises(DeliveryFailed), producer({"bootstrap.servers": bootstrap}, settings) as p:
        path = p.telemetry_path
        assert path is not None
        for i in range(20):
            p.send(TOPIC, "x" * 1024, key=str(i))
        with pytest.raises(DeliveryFailed, match="delivery failed"):
            p.flush()
        deadline = time.monotonic() + 30
        doc = wire.decode(path.read_bytes())
        while not doc.errors and time.monotonic() < deadline:
            time.sleep(0.2)
            doc = wire.decode(path.read_bytes())
        raw = path.read_bytes()
    (seen,) = doc.errors
    assert (seen.topic, seen.code, seen.count) == (TOPIC, "MSG_SIZE_TOO_LARGE", 20)
    assert doc.counters.failed == 20 and doc.counters.delivered == 0
    # The sidecar reads it twice, the second time past the stall threshold.
    thresholds = Thresholds(stall_seconds=10, heartbeat_seconds=60)
    before = wire.decode(raw)
    tracker.observe("p", msgspec.structs.replace(before, counters=msgspec.structs.replace(
        before.counters, failed=0)), True, now=0.0, wall_now=time.time())  # fmt: skip
    observed = tracker.observe("p", before, True, now=0.1, wall_now=time.time())
    later = tracker.observe("p", before, True, now=11.0, wall_now=time.time() + 11)
    assert observed.failing_seconds == 0.0 and later.failing_seconds > 10
    result = evaluate(RoundEvidence(cluster(), [later]), thresholds=thresholds, now=11.0)
    assert result.pod.verdict is V.WRITES_REJECTED, result.pod.reasons
    (reason,) = result.pod.reasons
    assert (
        f"topic {TOPIC}" in reason and "MSG_SIZE_TOO_LARGE (MESSAGE_TOO_LARGE), 20 times" in reason
    )
    assert "max.message.bytes" in reason
    old = msgspec.structs.replace(before, errors=[])
    tracker2 = ProducerTracker()
    tracker2.observe("q", msgspec.structs.replace(old, counters=msgspec.structs.replace(
        old.counters, failed=0)), True, now=0.0, wall_now=time.time())  # fmt: skip
    tracker2.observe("q", old, True, now=0.1, wall_now=time.time())
    legacy = tracker2.observe("q", old, True, now=11.0, wall_now=time.time() + 11)
    assert evaluate(
        RoundEvidence(cluster(), [legacy]), thresholds=thresholds, now=11.0
    ).pod.verdict is (V.WRITES_REJECTED)
    # What the issue saw: the same failures without an error code are metadata_stale.
    blind = dataclasses.replace(later, errors=())
    assert evaluate(
        RoundEvidence(cluster(), [blind]), thresholds=thresholds, now=11.0
    ).pod.verdict is (V.METADATA_STALE)
