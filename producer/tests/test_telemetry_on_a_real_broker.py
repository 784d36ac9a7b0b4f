"""The telemetry file the sidecar reads, written while producing to a real broker.

Covered, under whatever Python runs the tests: the file appears when the producer
opens, its liveness lock is held while it lives; every refresh decodes with the
reader's own strict decoder (`hangwatch_producer.wire.telemetry.decode`, what the
sidecar runs) and increases `seq` (the heartbeat) once per statistics event; the
document names this process, the topic written to and the broker, and its counters
reach what was acknowledged; a secret in the configuration never appears in it;
closing removes the file and the lock.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

from hangwatch_producer import ProducerSettings, producer
from hangwatch_producer.secrets import REDACTED
from hangwatch_producer.telemetry_files import lock_state
from hangwatch_producer.wire import telemetry as wire

SECRET = "do-not-show-8f3a1c"


def next_document(
    path: Path, accept: Callable[[wire.TelemetryDocument], bool], timeout: float = 30.0
) -> wire.TelemetryDocument:
    """The first document at `path` that `accept`s, read as the sidecar reads it."""
    deadline = time.monotonic() + timeout
    last: wire.TelemetryDocument | None = None
    while time.monotonic() < deadline:
        last = wire.decode(path.read_bytes())
        if accept(last):
            return last
        time.sleep(0.05)
    raise AssertionError(f"no accepted telemetry document within {timeout:g} s; last: {last}")


def test_heartbeat_identity_counts_and_cleanup(bootstrap: str, topic: str, tmp_path: Path) -> None:
    settings = ProducerSettings(telemetry_dir=str(tmp_path), message_timeout_ms=5_000)
    conf = {"bootstrap.servers": bootstrap, "ssl.key.password": SECRET}
    with producer(conf, settings) as p:
        path = p.telemetry_path
        assert path is not None and path.parent == tmp_path
        lock = tmp_path / wire.lock_name(wire.key_of(path.name) or "")
        assert lock_state(lock) is True
        first = wire.decode(path.read_bytes())
        for i in range(100):
            p.send(topic, f"value-{i}")
        p.flush()
        seqs = [first.seq]
        for _ in range(3):
            after = seqs[-1]
            seqs.append(next_document(path, lambda d: d.seq > after).seq)  # noqa: B023
        doc = next_document(path, lambda d: d.counters.delivered == 100 and d.stats is not None)
        raw = path.read_bytes()
    assert seqs == sorted(set(seqs)), f"the heartbeat went back: {seqs}"
    assert doc.identity.pid == os.getpid() and doc.state == "running"
    assert doc.counters.enqueued == 100 and doc.counters.failed == 0
    assert topic in doc.topics and doc.bootstrap == [bootstrap]
    assert doc.stats is not None and topic in doc.stats.topics
    assert any(b.nodename == bootstrap for b in doc.stats.brokers.values())
    assert SECRET.encode() not in raw
    assert doc.config is not None and doc.config["ssl.key.password"] == REDACTED
    assert not path.exists() and not lock.exists()
