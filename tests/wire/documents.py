"""Valid wire documents as JSON values, and strategies that break them (not a test module).

`telemetry()` is a full telemetry document as the wrapper writes it (identity, counters,
trimmed statistics with brokers and partitions); `TELEMETRY_PATHS` lists every place in
it where a hostile writer can put something else. `json_values` generates any JSON a
writer could produce with Python's encoder, including NaN, infinities, huge integers,
long strings and nesting.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from hypothesis import strategies as st

WALL = 1_800_000_000.0


def telemetry(seq: int = 3, **changes: Any) -> dict[str, Any]:
    """A complete, valid telemetry document (schema 1) with statistics."""
    broker = {
        "name": "10.0.0.1:9092/1", "nodeid": 1, "state": "UP", "nodename": "10.0.0.1:9092",
        "source": "learned", "stateage": 100, "outbuf_cnt": 0, "outbuf_msg_cnt": 0,
        "waitresp_cnt": 0, "waitresp_msg_cnt": 0, "tx": 10, "txerrs": 0, "txretries": 0,
        "req_timeouts": 0, "rx": 10, "rxerrs": 0, "connects": 1, "disconnects": 0,
        "rtt": {"avg": 5, "p99": 9, "max": 9, "cnt": 10},
    }  # fmt: skip
    partition = {
        "partition": 0, "leader": 1, "msgq_cnt": 0, "xmit_msgq_cnt": 0, "msgs_inflight": 0,
        "desired": False, "unknown": False, "msgq_bytes": 0, "xmit_msgq_bytes": 0,
        "txmsgs": 3, "msgs": 3,
    }  # fmt: skip
    doc = {
        "schema": 1, "kind": "hangwatch.producer.telemetry", "seq": seq, "ts": WALL,
        "monotonic": 1955.5, "started_ts": WALL - 10, "interval_seconds": 1.0,
        "state": "running", "detail": "full",
        "identity": {
            "pod": "etl-exec-1", "namespace": "jobs", "node": "node-a",
            "application_id": "spark-1", "executor_id": "1", "hostname": "etl-exec-1",
            "pid": 77, "producer": 1, "client_id": "hangwatch-etl-exec-1-77-1",
            "task": {"stage": 1, "partition": 2, "attempt": 0, "task_attempt_id": 9},
        },
        "counters": {
            "enqueued": 10, "delivered": 9, "failed": 0, "in_queue": 1,
            "queue_full_waits": 0, "unacknowledged": 1,
        },
        "last_delivery_ts": WALL - 1,
        "last_error": {"code": "_TRANSPORT", "reason": "down", "ts": WALL - 5, "fatal": False},
        "error_counts": {"_TRANSPORT": 1},
        "errors": [
            {"code": "_TRANSPORT", "topic": "", "count": 1, "first_ts": WALL - 5,
             "last_ts": WALL - 5},
        ],
        "throttle": {"count": 2, "last_ts": WALL - 3, "last_seconds": 1.5,
                     "broker": "10.0.0.1:9092/1"},
        "callbacks": {"pending": 0, "running_seconds": None, "completed": 4, "errors": 0},
        "bootstrap": ["10.0.0.1:9092"], "topics": ["t"], "topic_count": 1,
        "wrapper": {
            "version": "0.1.0", "flush_timeout_seconds": 65.0,
            "queue_full_timeout_seconds": 30.0, "callback_drain_timeout_seconds": 10.0,
            "librdkafka": "2.12.1",
        },
        "config": {"bootstrap.servers": "10.0.0.1:9092", "message.timeout.ms": 3000,
                   "enable.idempotence": True, "sasl.password": "[redacted]"},
        "acks": -1,
        "stats_received_ts": WALL - 0.1,
        "stats": {
            "name": "c#producer-1", "client_id": "c", "type": "producer", "ts": 5_000_000,
            "time": 1_800_000_000, "age": 2_000_000, "replyq": 0, "msg_cnt": 1,
            "msg_size": 10, "msg_max": 100000, "msg_size_max": 1073741824, "tx": 30,
            "rx": 30, "txmsgs": 9, "txmsg_bytes": 90, "metadata_cache_cnt": 1, "txerrs": 0,
            "req_timeouts": 0,
            "eos": {"idemp_state": "Assigned", "idemp_stateage": 5, "producer_id": 42,
                    "producer_epoch": 0, "epoch_cnt": 1},
            "brokers": {"10.0.0.1:9092/1": broker},
            "topics": {"t": {"topic": "t", "age": 2000, "metadata_age": 1000,
                             "partitions": {"0": partition, "-1": {**partition, "partition": -1,
                                                                   "leader": -1}}}},
        },
        # the Java client's reporter's own fields (absent from the wrapper's documents)
        "client": {"library": "kafka-clients", "version": "3.9.2", "reporter": "1",
                   "acknowledgements": True},
        "splits": {"count": 12, "first_ts": WALL - 20, "last_ts": WALL - 1},
    }  # fmt: skip
    doc.update(changes)
    return doc


def paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every key path of a JSON value (objects and lists), the root excluded."""
    found: list[tuple[Any, ...]] = []
    children = value.items() if isinstance(value, dict) else enumerate(value)
    for key, child in children:
        found.append((*prefix, key))
        if isinstance(child, dict | list):
            found.extend(paths(child, (*prefix, key)))
    return found


TELEMETRY_PATHS = paths(telemetry())
"""Every field of the full telemetry document, nested ones included."""


def replaced(doc: dict[str, Any], path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    """A deep copy of `doc` with the value at `path` replaced."""
    out = copy.deepcopy(doc)
    target: Any = out
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return out


json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**80), max_value=2**80)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=20)
    | st.sampled_from(["x" * 300, "x" * 5000, "-1", "oops"])
)
json_values = st.recursive(
    json_scalars,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)


def dumps(value: Any) -> bytes:
    """What a writer using Python's json module puts in a file (NaN and Infinity allowed)."""
    return json.dumps(value, allow_nan=True, separators=(",", ":")).encode()


def nested_json(depth: int) -> bytes:
    """JSON text of a list nested `depth` times (too deep for Python's own encoder)."""
    return b"[" * depth + b"]" * depth
