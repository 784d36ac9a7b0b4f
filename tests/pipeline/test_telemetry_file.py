"""The telemetry file a running producer writes: the contract of docs/telemetry.md.

Covered, against the real lab:
- the file appears when the producer opens (`producer-<pid>-<n>.json`) with its lock
  file held (flock), and both are removed on close, on a clean exit and when the
  block raised;
- a producer process that dies without closing leaves its file with the lock free
  (what the sidecar's garbage collection relies on);
- a healthy idle producer keeps refreshing it (the heartbeat): `seq`, `ts` and
  `monotonic` increase once per statistics interval;
- the document carries every documented field, identity from the environment,
  counters, and trimmed librdkafka statistics (broker state/nodeid/name, partition
  leader and queue counts, top-level ts/age/msg_cnt/txmsgs/txerrs/metadata_cache_cnt),
  and every field it carries is described in docs/telemetry.md;
- replacement is atomic: a reader hammering the file never sees a partial document;
- the size bound holds for a topic with hundreds of partitions (detail is dropped);
- `state` turns to `closing` while the final flush waits.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import threading
from pathlib import Path
from typing import Any

import pytest

from hangwatch_lab import Lab
from hangwatch_pipeline import DeliveryFailed, ProducerSettings, producer
from hangwatch_producer.telemetry import SCHEMA_VERSION
from hangwatch_testing.waiting import wait_for

from .producer_helpers import FAST, crashed_producer, doc_where, read_doc

pytestmark = pytest.mark.usefixtures("producer_env")

DOCS = Path(__file__).resolve().parents[2] / "docs" / "telemetry.md"

TOP_LEVEL = {
    "schema", "kind", "seq", "ts", "monotonic", "started_ts", "interval_seconds", "state",
    "detail", "identity", "counters", "last_delivery_ts", "last_error", "error_counts",
    "errors", "throttle", "callbacks", "bootstrap", "topics", "topic_count", "wrapper", "config",
    "stats_received_ts", "stats", "acks",
}  # fmt: skip


def test_file_appears_at_open_and_is_removed_on_close(lab: Lab, producer_env: Path) -> None:
    with producer({"bootstrap.servers": lab.bootstrap}, FAST) as p:
        path = p.telemetry_path
        assert path is not None and path.parent == producer_env
        assert re.fullmatch(rf"producer-{os.getpid()}-{p.number}\.json", path.name)
        assert read_doc(path)["seq"] == 1
        assert lock_is_held(path.with_suffix(".lock"))
    assert not list(producer_env.iterdir())
    with pytest.raises(KeyError), producer({"bootstrap.servers": lab.bootstrap}, FAST):
        raise KeyError("job failure")
    assert not list(producer_env.iterdir())


def lock_is_held(lock: Path) -> bool:
    """What the sidecar checks: can another open file description take the flock?"""
    fd = os.open(lock, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def test_crashed_producer_leaves_its_file_with_the_lock_free(lab: Lab, producer_env: Path) -> None:
    run, path = crashed_producer(lab.bootstrap)
    assert run.returncode == 1, run.stderr
    assert path.parent == producer_env and read_doc(path)["identity"]["pid"] != os.getpid()
    assert not lock_is_held(path.with_suffix(".lock"))


def test_idle_producer_keeps_the_heartbeat(lab: Lab) -> None:
    with producer({"bootstrap.servers": lab.bootstrap}, FAST) as p:
        assert p.telemetry_path is not None
        first = doc_where(p.telemetry_path, lambda d: d["stats"] is not None, 30)
        later = doc_where(p.telemetry_path, lambda d: d["seq"] >= first["seq"] + 2, 30)
    assert later["ts"] > first["ts"] and later["monotonic"] > first["monotonic"]
    assert later["stats"]["ts"] > first["stats"]["ts"]
    assert later["interval_seconds"] == 1.0 and later["state"] == "running"
    assert later["counters"]["enqueued"] == 0


def test_document_carries_the_documented_fields(lab: Lab, monkeypatch: pytest.MonkeyPatch) -> None:
    env = {
        "HANGWATCH_POD_NAME": "job-exec-1",
        "HANGWATCH_POD_NAMESPACE": "spark",
        "HANGWATCH_NODE_NAME": "node-a",
        "SPARK_APPLICATION_ID": "spark-0123",
        "SPARK_EXECUTOR_ID": "7",
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with producer({"bootstrap.servers": lab.bootstrap}, FAST) as p:
        assert p.telemetry_path is not None
        for i in range(30):
            p.send("t", f"value-{i}", key=str(i))
        p.flush()
        doc = doc_where(p.telemetry_path, lambda d: d["counters"]["delivered"] == 30, 30)
    assert set(doc) == TOP_LEVEL
    assert doc["schema"] == SCHEMA_VERSION and doc["detail"] == "full"
    identity = doc["identity"]
    assert (identity["pod"], identity["namespace"], identity["node"]) == env_values(env)
    assert (identity["application_id"], identity["executor_id"]) == ("spark-0123", "7")
    assert identity["pid"] == os.getpid() and identity["client_id"].startswith("hangwatch-")
    assert doc["counters"] == {
        "enqueued": 30, "delivered": 30, "failed": 0, "in_queue": 0,
        "queue_full_waits": 0, "unacknowledged": 0,
    }  # fmt: skip
    assert doc["last_delivery_ts"] <= doc["ts"] and doc["last_error"] is None
    assert doc["errors"] == [] and doc["error_counts"] == {} and doc["throttle"] is None
    assert doc["bootstrap"] == lab.bootstrap.split(",") and doc["topics"] == ["t"]
    assert doc["config"]["message.timeout.ms"] == 3000
    stats = doc["stats"]
    for key in ("ts", "age", "msg_cnt", "txmsgs", "txerrs", "metadata_cache_cnt"):
        assert isinstance(stats[key], int), key
    assert stats["txmsgs"] == 30
    up = [b for b in stats["brokers"].values() if b["state"] == "UP"]
    assert up and all({"name", "nodeid", "state", "rtt"} <= set(b) for b in up)
    partitions = stats["topics"]["t"]["partitions"]
    assert {"0", "1", "2"} <= set(partitions)
    assert all(partitions[p]["leader"] in (1, 2, 3) for p in ("0", "1", "2"))
    assert all({"msgq_cnt", "xmit_msgq_cnt", "msgs_inflight"} <= set(partitions[p]) for p in "012")
    assert_documented(doc)


def env_values(env: dict[str, str]) -> tuple[str, str, str]:
    return env["HANGWATCH_POD_NAME"], env["HANGWATCH_POD_NAMESPACE"], env["HANGWATCH_NODE_NAME"]


def assert_documented(doc: dict[str, Any]) -> None:
    """Every key the real document carries is named (in backticks) in docs/telemetry.md."""
    text = DOCS.read_text()
    stats = doc["stats"]
    broker = next(iter(stats["brokers"].values()))
    partition = next(iter(stats["topics"]["t"]["partitions"].values()))
    groups = [doc, doc["identity"], doc["counters"], doc["callbacks"], doc["wrapper"]]
    groups += [stats, broker, broker["rtt"], stats["eos"], stats["topics"]["t"], partition]
    missing = {key for group in groups for key in group if f"`{key}`" not in text}
    assert not missing, f"fields missing from docs/telemetry.md: {sorted(missing)}"


def test_replacement_is_atomic(lab: Lab) -> None:
    reads: list[int] = []
    broken: list[str] = []
    with producer({"bootstrap.servers": lab.bootstrap}, FAST) as p:
        path = p.telemetry_path
        assert path is not None
        stop = threading.Event()

        def hammer() -> None:
            while not stop.is_set():
                data = path.read_bytes()
                try:
                    reads.append(json.loads(data)["seq"])
                except ValueError:
                    broken.append(data[:80].decode(errors="replace"))

        reader = threading.Thread(target=hammer)
        reader.start()
        try:
            wait_for(lambda: reads and reads[-1] >= 3, 30, "two replacements under reads")
        finally:
            stop.set()
            reader.join()
        names = {f.name for f in path.parent.iterdir()}
    assert not broken
    assert reads == sorted(reads) and len(reads) > 100
    assert names <= {path.name, f".{path.name}.tmp", path.with_suffix(".lock").name}


def test_size_bound_holds_for_hundreds_of_partitions(producer_env: Path) -> None:
    settings = ProducerSettings(message_timeout_ms=3_000, telemetry_max_bytes=16_384)
    with (
        Lab(brokers=3, topics={"wide": 400}) as lab,
        producer({"bootstrap.servers": lab.bootstrap}, settings) as p,
    ):
        assert p.telemetry_path is not None
        for partition in range(400):
            p.send("wide", "x", partition=partition)
        p.flush()
        # the document written after the flush: one written while the sends were still
        # being answered has stats and fewer deliveries (seen: 366 of 400 under load)
        doc = doc_where(
            p.telemetry_path,
            lambda d: d["stats"] is not None and d["counters"]["delivered"] == 400,
            30,
        )
        size = p.telemetry_path.stat().st_size
    assert size <= 16_384
    assert doc["detail"] in ("topics", "brokers")
    wide = doc["stats"]["topics"]["wide"]
    assert wide["partition_count"] == 400 and wide["leaderless_count"] == 0
    assert doc["config"] is not None


def test_state_is_closing_while_the_final_flush_waits(lab: Lab) -> None:
    for broker in (1, 2, 3):
        lab.down(broker)
    failures: list[BaseException] = []
    p = producer({"bootstrap.servers": lab.bootstrap}, FAST)
    assert p.telemetry_path is not None
    p.send("t", "stuck")

    def close() -> None:
        try:
            p.close()
        except DeliveryFailed as exc:
            failures.append(exc)

    closer = threading.Thread(target=close)
    closer.start()
    try:
        doc = doc_where(p.telemetry_path, lambda d: d["state"] == "closing", 30)
        assert doc["counters"]["unacknowledged"] == 1
    finally:
        closer.join(10)
    assert len(failures) == 1
