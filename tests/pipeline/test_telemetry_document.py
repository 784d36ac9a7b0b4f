"""The telemetry document builder is pure: statistics trimming, size bound, identity, scrubbing.

Covered, without Kafka (inputs shaped like librdkafka 2.x statistics):
- `trim_statistics` drops histograms and request counters, keeps broker state/queues
  and an rtt summary, per-partition leader and queue counts, and sums `txerrs`;
- each detail level drops what docs/telemetry.md says, in order;
- `encode_document` returns the most detailed level that fits the bound, records it
  in `detail`, and the minimal document fits even with huge lists and strings;
- `build_document` does not mutate its inputs and is deterministic;
- identity comes from the environment, the Spark task and the process; a task
  context is read only when pyspark is already imported;
- secret values are scrubbed from error text.
"""

from __future__ import annotations

import copy
import json
import sys
from dataclasses import replace
from types import SimpleNamespace
from typing import Any

import pytest

from hangwatch_producer.secrets import REDACTED
from hangwatch_producer.telemetry import (
    MAX_STRING,
    Snapshot,
    build_document,
    encode_document,
    environment_identity,
    producer_identity,
    scrub,
    spark_task_identity,
    trim_statistics,
)

HISTOGRAM = {
    "min": 1, "max": 9, "avg": 5, "sum": 50, "stddev": 2, "p50": 5, "p75": 7, "p90": 8,
    "p95": 9, "p99": 9, "p99_99": 9, "outofrange": 0, "hdrsize": 11376, "cnt": 10,
}  # fmt: skip


def broker(node: int) -> dict[str, Any]:
    return {
        "name": f"10.0.0.{node}:9092/{node}", "nodeid": node, "nodename": f"10.0.0.{node}:9092",
        "source": "learned", "state": "UP", "stateage": 100, "outbuf_cnt": 0,
        "outbuf_msg_cnt": 0, "waitresp_cnt": 1, "waitresp_msg_cnt": 5, "tx": 10,
        "txbytes": 999, "txerrs": node, "txretries": 0, "req_timeouts": 0, "rx": 10,
        "rxerrs": 0, "connects": 1, "disconnects": 0, "int_latency": HISTOGRAM,
        "outbuf_latency": HISTOGRAM, "rtt": HISTOGRAM, "throttle": HISTOGRAM,
        "req": {"Produce": 9, "Metadata": 1}, "toppars": {"t-0": {"topic": "t", "partition": 0}},
    }  # fmt: skip


def partition(pid: int, leader: int) -> dict[str, Any]:
    return {
        "partition": pid, "broker": leader, "leader": leader, "desired": False,
        "unknown": False, "msgq_cnt": 1, "msgq_bytes": 10, "xmit_msgq_cnt": 2,
        "xmit_msgq_bytes": 20, "fetchq_cnt": 0, "fetch_state": "none", "txmsgs": 3,
        "txbytes": 30, "msgs": 4, "msgs_inflight": 1, "next_ack_seq": 0, "acked_msgid": 0,
    }  # fmt: skip


def raw_stats(partitions: int = 3, leaderless: tuple[int, ...] = ()) -> dict[str, Any]:
    parts = {str(p): partition(p, -1 if p in leaderless else p % 3 + 1) for p in range(partitions)}
    parts["-1"] = partition(-1, -1)
    return {
        "name": "c#producer-1", "client_id": "c", "type": "producer", "ts": 5_000_000,
        "time": 1_700_000_000, "age": 2_000_000, "replyq": 0, "msg_cnt": 7, "msg_size": 70,
        "msg_max": 100000, "msg_size_max": 1073741824, "simple_cnt": 0,
        "metadata_cache_cnt": 1, "tx": 30, "tx_bytes": 999, "rx": 30, "txmsgs": 100,
        "txmsg_bytes": 1000, "rxmsgs": 0,
        "eos": {"idemp_state": "Assigned", "idemp_stateage": 5, "txn_state": "Init",
                "producer_id": 42, "producer_epoch": 0, "epoch_cnt": 1},
        "brokers": {b["name"]: b for b in (broker(1), broker(2), broker(3))},
        "topics": {"t": {"topic": "t", "age": 2000, "metadata_age": 1000,
                         "batchsize": HISTOGRAM, "batchcnt": HISTOGRAM, "partitions": parts}},
    }  # fmt: skip


SNAPSHOT = Snapshot(
    seq=4, ts=1_700_000_001.5, monotonic=123.25, started_ts=1_700_000_000.0,
    interval_seconds=1.0, state="running",
    identity={"pod": "p", "pid": 1, "client_id": "c", "task": None},
    counters={"enqueued": 3, "delivered": 2, "failed": 0, "in_queue": 1,
              "queue_full_waits": 0, "unacknowledged": 1},
    last_delivery_ts=1_700_000_001.0, last_error=None, error_counts={},
    callbacks={"pending": 0, "running_seconds": None, "completed": 0, "errors": 0},
    config={"acks": "all"}, wrapper={"flush_timeout_seconds": 65.0},
    bootstrap=["10.0.0.1:9092"], topics=["t"], stats_received_ts=1_700_000_001.4,
)  # fmt: skip


def test_trim_drops_histograms_and_keeps_queue_state() -> None:
    stats = trim_statistics(raw_stats())
    assert stats is not None
    assert stats["txerrs"] == 1 + 2 + 3 and stats["msg_cnt"] == 7
    assert stats["eos"] == {
        "idemp_state": "Assigned", "idemp_stateage": 5, "producer_id": 42,
        "producer_epoch": 0, "epoch_cnt": 1,
    }  # fmt: skip
    b = stats["brokers"]["10.0.0.2:9092/2"]
    assert {"int_latency", "outbuf_latency", "throttle", "req", "toppars"}.isdisjoint(b)
    assert b["rtt"] == {"avg": 5, "p99": 9, "max": 9, "cnt": 10}
    assert (b["state"], b["nodeid"], b["waitresp_msg_cnt"]) == ("UP", 2, 5)
    topic = stats["topics"]["t"]
    assert {"batchsize", "batchcnt"}.isdisjoint(topic)
    assert topic["partitions"]["1"]["leader"] == 2
    assert "fetch_state" not in topic["partitions"]["1"]
    assert "-1" in topic["partitions"]  # the unassigned queue: messages awaiting metadata


def test_detail_levels_drop_partitions_then_brokers() -> None:
    raw = raw_stats(partitions=6, leaderless=(2, 5))
    compact = trim_statistics(raw, "compact")
    assert compact is not None
    assert set(compact["topics"]["t"]["partitions"]["0"]) == {
        "leader", "msgq_cnt", "xmit_msgq_cnt", "msgs_inflight",
    }  # fmt: skip
    topics = trim_statistics(raw, "topics")
    assert topics is not None
    t = topics["topics"]["t"]
    assert "partitions" not in t and t["partition_count"] == 6
    assert (t["leaderless"], t["leaderless_count"]) == ([2, 5], 2)
    assert (t["msgq_cnt"], t["xmit_msgq_cnt"], t["msgs_inflight"]) == (7, 14, 7)
    assert "rtt" in topics["brokers"]["10.0.0.1:9092/1"]
    brokers = trim_statistics(raw, "brokers")
    assert brokers is not None
    assert brokers["brokers"]["10.0.0.1:9092/1"] == {
        "name": "10.0.0.1:9092/1", "nodeid": 1, "state": "UP",
    }  # fmt: skip
    assert trim_statistics(raw, "minimal") is None


def test_encode_keeps_the_most_detail_that_fits() -> None:
    small = json.loads(encode_document(SNAPSHOT, raw_stats(), 65_536))
    assert small["detail"] == "full"
    wide = raw_stats(partitions=2000)
    for bound in (16_384, 65_536):
        data = encode_document(SNAPSHOT, wide, bound)
        doc = json.loads(data)
        assert len(data) <= bound and doc["detail"] in ("compact", "topics")
        assert doc["stats"]["topics"]["t"]
    huge = replace(
        SNAPSHOT,
        topics=[f"topic-{i:0>240}" for i in range(5000)],
        bootstrap=[f"host-{i:0>240}:9092" for i in range(5000)],
        config={f"key.{i}": "v" * 200 for i in range(1000)},
    )
    data = encode_document(huge, wide, 16_384)
    doc = json.loads(data)
    assert len(data) <= 16_384 and doc["detail"] == "minimal"
    assert doc["config"] is None and doc["stats"] is None
    assert len(doc["topics"]) == 10 and doc["topic_count"] == 5000


def test_build_document_is_pure() -> None:
    raw = raw_stats()
    before = copy.deepcopy(raw)
    first = build_document(SNAPSHOT, trim_statistics(raw))
    second = build_document(SNAPSHOT, trim_statistics(raw))
    assert first == second and raw == before
    assert first["seq"] == 4 and first["stats"]["ts"] == 5_000_000


def test_identity_from_environment() -> None:
    identity = environment_identity(
        {
            "HANGWATCH_POD_NAME": "pod-1",
            "HANGWATCH_POD_NAMESPACE": "ns",
            "HANGWATCH_NODE_NAME": "node",
            "SPARK_APPLICATION_ID": "spark-app",
            "HANGWATCH_EXECUTOR_ID": "3",
        }
    )
    assert identity == {
        "pod": "pod-1", "namespace": "ns", "node": "node",
        "application_id": "spark-app", "executor_id": "3",
    }  # fmt: skip
    assert (
        environment_identity({"SPARK_EXECUTOR_ID": "1", "HANGWATCH_EXECUTOR_ID": "2"})[
            "executor_id"
        ]
        == "1"
    )
    assert environment_identity({})["pod"] is None


def test_producer_identity_merges_environment_task_and_process() -> None:
    task = {"stage": 2, "partition": 17, "attempt": 0, "task_attempt_id": 9, "application_id": "a"}
    identity = producer_identity(
        {"SPARK_EXECUTOR_ID": "4"}, task, pid=10, number=2, client_id="c" * 999, hostname="h"
    )
    assert identity["application_id"] == "a"  # from the task when the environment lacks it
    assert identity["task"] == {"stage": 2, "partition": 17, "attempt": 0, "task_attempt_id": 9}
    assert (identity["executor_id"], identity["pid"], identity["producer"]) == ("4", 10, 2)
    assert len(identity["client_id"]) == MAX_STRING and task["application_id"] == "a"
    env_first = producer_identity(
        {"SPARK_APPLICATION_ID": "env"}, task, pid=1, number=1, client_id="c", hostname="h"
    )
    assert env_first["application_id"] == "env"
    assert producer_identity({}, None, pid=1, number=1, client_id="c", hostname="h")["task"] is None


class FakeTaskContext:
    """Stands in for pyspark.TaskContext (pyspark itself is not a dependency of the wrapper)."""

    @staticmethod
    def get() -> SimpleNamespace:
        return SimpleNamespace(
            stageId=lambda: 2,
            partitionId=lambda: 17,
            attemptNumber=lambda: 1,
            taskAttemptId=lambda: 123,
            getLocalProperty=lambda key: None,
        )


def test_spark_task_identity_only_when_pyspark_is_loaded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, "pyspark", raising=False)
    assert spark_task_identity() is None
    monkeypatch.setitem(sys.modules, "pyspark", SimpleNamespace(TaskContext=FakeTaskContext))  # type: ignore[arg-type]
    assert spark_task_identity() == {
        "stage": 2, "partition": 17, "attempt": 1, "task_attempt_id": 123, "application_id": None,
    }  # fmt: skip


def test_scrub_removes_secret_values_and_bounds_length() -> None:
    text = "SASL authentication failed for password hunter2hunter2 at broker"
    assert scrub(text, ["hunter2hunter2"]) == text.replace("hunter2hunter2", REDACTED)
    assert len(scrub("x" * 10_000, [])) == MAX_STRING
