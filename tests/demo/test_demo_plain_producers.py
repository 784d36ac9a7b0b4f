"""`hangwatch demo`'s plain-producer scenarios: producers hangwatch did not instrument.

Covers, with the real command (subprocess, `--json`) on `local-cluster` executors whose
tasks write through a bare `confluent_kafka.Producer` (no wrapper, no telemetry), one
sidecar process per executor with its socket view narrowed to that executor's process
tree and Spark's view of that executor:

- `plain-s4-blocked-callback`: a delivery callback blocks the task's own thread in one
  executor -> that executor's sidecar says producer_hung on positive evidence: the
  Python stack view (py-spy) shows the task's thread inside the delivery callback the
  client called, while the socket view shows every connection silent and Spark runs
  its task (silence alone would only be producer_silent) -> then the operator restarts exactly
  that executor -> then events flow again; the other executor's sidecar, which shares
  the host's network namespace, never says producer_hung (per-executor attribution);
- `plain-idle-between-runs` (control): the run ends, its producers stay open in the
  Python workers and idle past the stall threshold (the sidecars' /status shows the
  silence) with no task running -> never flagged, never restarted;
- `plain-s2-stuck-after-election`: an election, then the producers' batches are never
  answered -> broker_degraded from a request unanswered on a live connection, within the
  producers' request timeout (a broker may hold a write that long) -> no restart: the
  client gives up on the request by its own message timeout, Spark re-runs the task and
  events flow again;

each with 0 lost events and exit code 0, and no kernel rule left behind.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from hangwatch_demo.scenarios import Timing
from tests.demo.running import run_demo


def _demo(*scenarios: str, keep: Path) -> tuple[dict[str, dict[str, Any]], int]:
    return run_demo(*scenarios, keep=keep)


def _verdict_then_restart_then_flowing(row: dict[str, Any]) -> None:
    """The verdict came after the fault, the restart after the verdict, and events flowed
    again after the restart (all seconds from the fault; how fast is a benchmark's)."""
    detected, restarted, again = (
        row["detect_seconds"], row["restart_seconds"], row["progress_again_seconds"]
    )  # fmt: skip
    assert detected is not None and restarted is not None and again is not None, row
    assert 0 <= detected <= restarted < again, row


def _hung(row: dict[str, Any]) -> set[str]:
    """The executor pods that some sidecar reported producer_hung for."""
    return {c.split(" ")[0] for _, c in row["changes"] if c.endswith(" producer_hung")}


def test_blocked_callback_restarts_that_executor_and_idle_producers_are_left_alone(
    kernel_faults: None, tmp_path: Path
) -> None:
    rows, _ = _demo("plain-s4-blocked-callback", "plain-idle-between-runs", keep=tmp_path)
    s4, idle = rows["plain-s4-blocked-callback"], rows["plain-idle-between-runs"]
    assert s4["producer"] == "plain" and idle["producer"] == "plain-cached"
    assert s4["verdict"] == "producer_hung" and s4["restarts"] == 1, s4
    assert re.fullmatch(r"restart exec-\d+ \(producer_hung\)", s4["action"]), s4["action"]
    restarted = s4["action"].split()[1]
    assert _hung(s4) == {restarted}, "only the wedged executor's sidecar says producer_hung"
    _verdict_then_restart_then_flowing(s4)
    assert any(
        r.startswith("socket view: every connection") and "Spark runs a task" in r
        for r in s4["reasons"]
    ), s4["reasons"]
    assert any(
        r.startswith("python stacks: ") and "that the Kafka client called from Producer_" in r
        for r in s4["reasons"]
    ), s4["reasons"]
    assert s4["progress_again_seconds"] is not None and s4["task_retries"] >= 1
    assert idle["verdict"] == "healthy" and idle["action"] == "none", idle
    assert idle["restarts"] == 0 and _hung(idle) == set() and idle["changes"] == [], idle
    # ... although its sidecars saw every connection silent past the stall threshold
    assert (idle["longest_silence_seconds"] or 0) >= Timing().stall_seconds, idle
    for row in rows.values():
        assert row["ok"] and row["lost"] == 0 and row["events"] > 100, row


def test_stuck_requests_after_an_election_are_the_brokers_and_the_client_recovers_alone(
    kernel_faults: None, tmp_path: Path
) -> None:
    rows, _ = _demo("plain-s2-stuck-after-election", keep=tmp_path)
    s2 = rows["plain-s2-stuck-after-election"]
    assert s2["verdict"] == "broker_degraded" and s2["restarts"] == 0, s2
    assert _hung(s2) == set() and s2["action"] == "alert only (broker_degraded)", s2
    assert any(
        "socket view: connection" in r and "within the producers' request timeout" in r
        for r in s2["reasons"]
    ), s2["reasons"]
    # the client's own timeout failed the task, Spark re-ran it: events flowed again
    assert s2["task_retries"] >= 1 and s2["progress_again_seconds"] is not None, s2
    assert s2["detect_seconds"] is not None and s2["detect_seconds"] >= 0, s2
    assert s2["ok"] and s2["lost"] == 0, s2
