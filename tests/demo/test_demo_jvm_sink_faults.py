"""Faults under Spark's own Kafka sink (the connector's JVM `KafkaProducer`), judged without
its cooperation: broker faults alert, a wedged producer is restarted, an election is left
alone.

Covers, with the real `hangwatch demo` command (subprocess, `--json`) on `local-cluster`
executors writing with `spark-sql-kafka-0-10` to the real Apache Kafka lab engine, one
real sidecar per executor (no telemetry: the socket view narrowed to that executor's
process tree and Spark's view with the executor's thread dump), the operator's own
decision code, under the demo's fast settings (stall threshold 5 s):

- `jvm-frozen-leader`: the topic's leader frozen for 20 s (SIGSTOP: its kernel
  acknowledges, nothing answers) and fenced by the controller, which elects new
  leaders; the producers' requests already sent to it wait -> `broker_degraded` (the
  unanswered connection's own broker fails the sidecar's probes: evidence against the
  broker), an alert, no restart; the producers move on once it is back, nothing lost;
- `jvm-blackholed-broker`: one broker blackholed -> `broker_degraded`, an alert, no
  restart; healed, the job finishes with every event;
- `jvm-wedged-interceptor`: a producer interceptor (loaded through the connector's own
  `kafka.interceptor.classes` option) blocks the JVM producer's I/O thread in one
  executor -> `producer_hung` from Spark's view alone (the executor's real thread dump:
  the `kafka-producer-network-thread` inside the interceptor's `onAcknowledgement`)
  -> the operator restarts exactly that executor -> Spark re-runs its task on a new
  one, events flow again, every event in the topic;
- `jvm-streaming-wedged-interceptor`: the same wedge under a Structured Streaming query
  (`writeStream.format("kafka")`, a micro-batch every 4 s) -> `producer_hung` -> that
  executor restarted -> Spark re-runs the micro-batch's task on another executor, the
  query goes on, every event in the topic;
- `jvm-election-recovers`: a real 1.5 s election (the leader frozen until the controller
  fences it) -> never a restart verdict, never a restart.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from tests.demo.running import RESTART_VERDICTS, run_demo, verdicts_seen

BROKER_FAULTS = ("jvm-frozen-leader", "jvm-blackholed-broker")
"""The cluster's faults: alerted, never restarted."""
WEDGES_AND_ELECTION = (
    "jvm-wedged-interceptor",
    "jvm-streaming-wedged-interceptor",
    "jvm-election-recovers",
)
"""A wedged producer (batch and streaming) restarted, an election left alone: one hang and
one control, also run on the Spark 3.5 line (tests/spark_lines)."""


def _run(scenarios: tuple[str, ...], keep: Path) -> dict[str, dict[str, Any]]:
    """The scenarios' rows, each a JVM-sink run that wrote, lost nothing and finished."""
    rows, _ = run_demo(*scenarios, keep=keep, timeout_seconds=240 * len(scenarios))
    for row in rows.values():
        assert row["producer"] == "jvm", row
        assert row["ok"] and row["lost"] == 0 and row["events"] > 100, row
    return rows


@pytest.mark.timeout(540)
def test_spark_kafka_sink_broker_faults_alert_and_are_never_restarted(
    kernel_faults: None, tmp_path: Path
) -> None:
    rows = _run(BROKER_FAULTS, tmp_path)
    for name in BROKER_FAULTS:
        degraded = rows[name]
        assert degraded["verdict"] == "broker_degraded", degraded
        assert not verdicts_seen(degraded) & RESTART_VERDICTS and degraded["restarts"] == 0, (
            degraded
        )
        assert degraded["action"] == "alert only (broker_degraded)", degraded
        assert degraded["progress_again_seconds"] is not None, degraded


@pytest.mark.timeout(780)
def test_spark_kafka_sink_wedge_restarts_that_executor_and_an_election_is_left_alone(
    tmp_path: Path,
) -> None:
    rows = _run(WEDGES_AND_ELECTION, tmp_path)
    election = rows["jvm-election-recovers"]
    assert not verdicts_seen(election) & RESTART_VERDICTS and election["restarts"] == 0, election
    for name in ("jvm-wedged-interceptor", "jvm-streaming-wedged-interceptor"):
        _restarted_for_a_wedge(rows[name])


def _restarted_for_a_wedge(wedged: dict[str, Any]) -> None:
    """producer_hung from the thread dump, only the wedged executor restarted, and events
    flowing again after the restart (order; how fast is the benchmark's)."""
    assert wedged["verdict"] == "producer_hung" and wedged["restarts"] == 1, wedged
    assert re.fullmatch(r"restart exec-\d+ \(producer_hung\)", wedged["action"]), wedged
    restarted = wedged["action"].split()[1]
    hung = {str(c[1]).split(" ")[0] for c in wedged["changes"] if c[1].endswith("producer_hung")}
    assert hung == {restarted}, "only the wedged executor's sidecar says producer_hung"
    assert any(
        "kafka-producer-network-thread" in r and "WedgeInterceptor.onAcknowledgement" in r
        for r in wedged["reasons"]
    ), wedged["reasons"]
    detected, restarted_at, again = (
        wedged["detect_seconds"], wedged["restart_seconds"], wedged["progress_again_seconds"]
    )  # fmt: skip
    assert detected is not None and restarted_at is not None and again is not None, wedged
    assert 0 <= detected <= restarted_at < again, wedged
    assert wedged["task_retries"] >= 1, wedged
