"""Child process that owns the mock cluster and obeys JSON commands on stdin.

Started by `hangwatch_lab.lab.Lab` as `python -m hangwatch_lab.mockserver BROKERS`.
It prints one JSON line `{"bootstrap": ..., "pid": ...}` when ready, then reads one
JSON command per line and answers one JSON line each: `{"ok": true}` or
`{"ok": false, "error": "..."}`. It exits when stdin closes, so an orphaned mock
never outlives the lab that started it.
"""

from __future__ import annotations

import ctypes
import json
import os
import sys
from typing import Any

from hangwatch.errors import LabError
from hangwatch_lab.mock import MockCluster


def _apply(mock: MockCluster, cmd: dict[str, Any]) -> dict[str, Any] | None:
    op = cmd["op"]
    if op == "create_topic":
        mock.create_topic(cmd["topic"], int(cmd["partitions"]), int(cmd["replication"]))
    elif op == "set_topic_error":
        mock.set_topic_error(cmd["topic"], int(cmd["error"]))
    elif op == "set_leader":
        mock.set_leader(cmd["topic"], int(cmd["partition"]), int(cmd["broker"]))
    elif op == "set_down":
        mock.set_down(int(cmd["broker"]))
    elif op == "set_up":
        mock.set_up(int(cmd["broker"]))
    elif op == "set_rtt":
        mock.set_rtt(int(cmd["broker"]), int(cmd["rtt_ms"]))
    elif op == "push_request_errors":
        mock.push_request_errors(int(cmd["api_key"]), [int(e) for e in cmd["errors"]])
    elif op == "push_broker_delays":
        mock.push_broker_delays(
            int(cmd["broker"]), int(cmd["api_key"]), int(cmd["count"]), int(cmd["rtt_ms"])
        )
    elif op == "broker_stack_count":
        return {"count": mock.broker_stack_count(int(cmd["broker"]), int(cmd["api_key"]))}
    elif op == "clear_request_errors":
        mock.clear_request_errors(int(cmd["api_key"]))
    elif op == "ping":
        pass
    else:
        raise LabError(f"unknown mock command {op!r}")
    return None


def serve(brokers: int) -> int:
    """Run the mock cluster until stdin closes."""
    mock = MockCluster(brokers)
    out = sys.stdout
    out.write(json.dumps({"bootstrap": mock.bootstrap, "pid": os.getpid()}) + "\n")
    out.flush()
    try:
        for line in sys.stdin:
            if not line.strip():
                continue
            try:
                result = _apply(mock, json.loads(line))
                reply: dict[str, Any] = {"ok": True, **(result or {})}
            except (LabError, KeyError, ValueError, TypeError, ctypes.ArgumentError) as exc:
                reply = {"ok": False, "error": str(exc)}
            out.write(json.dumps(reply) + "\n")
            out.flush()
    finally:
        mock.close()
    return 0


if __name__ == "__main__":
    sys.exit(serve(int(sys.argv[1])))
