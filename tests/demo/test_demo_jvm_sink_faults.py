"""Hangs of Spark's own Kafka sink (the connector's JVM `KafkaProducer`), caught without
its cooperation, and its election control.

Covers, with the real `hangwatch demo` command (subprocess, `--json`) on `local-cluster`
executors writing with `spark-sql-kafka-0-10` to the real Apache Kafka lab engine, one
real sidecar per executor (no telemetry: the socket view narrowed to that executor's
process tree and Spark's view with the executor's thread dump), the operator's own
decision code, under the demo's fast settings (stall threshold 5 s):

- `jvm-leader-stops-answering`: a partition leader stops answering the executors' open
  connections (their requests acknowledged by TCP, never answered; it keeps its
  leadership and serves every new connection) -> `producer_hung` from the socket view
  -> each executor restarted -> Spark runs the lost tasks again on replacements, whose
  new connections are served -> every event in the topic;
- `jvm-blackholed-broker`: one broker blackholed -> `broker_degraded`, an alert, no
  restart; healed, the job finishes with every event;
- `jvm-election-recovers`: a real 1.5 s election (the leader frozen until the controller
  fences it) -> never a restart verdict, never a restart.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.demo.running import run_demo

SCENARIOS = ("jvm-leader-stops-answering", "jvm-blackholed-broker", "jvm-election-recovers")
RESTART_VERDICTS = {"producer_hung", "metadata_stale"}


def _seen(row: dict[str, object]) -> set[str]:
    return {str(c[1]).split(" ", 1)[1] for c in row["changes"]}  # type: ignore[attr-defined]


@pytest.mark.timeout(900)
def test_spark_kafka_sink_hangs_are_judged_without_its_cooperation(
    kernel_faults: None, tmp_path: Path
) -> None:
    rows, _ = run_demo(*SCENARIOS, keep=tmp_path, timeout_seconds=840)
    assert sorted(rows) == sorted(SCENARIOS)
    for row in rows.values():
        assert row["producer"] == "jvm", row
        assert row["ok"] and row["lost"] == 0 and row["events"] > 100, row

    hung = rows["jvm-leader-stops-answering"]
    assert hung["verdict"] == "producer_hung" and hung["restarts"] >= 1, hung
    assert hung["action"].startswith("restart"), hung
    assert any(r.startswith("socket view:") and "unanswered" in r for r in hung["reasons"]), hung
    assert hung["detect_seconds"] <= hung["restart_seconds"] < hung["progress_again_seconds"]

    degraded = rows["jvm-blackholed-broker"]
    assert degraded["verdict"] == "broker_degraded", degraded
    assert not _seen(degraded) & RESTART_VERDICTS and degraded["restarts"] == 0, degraded
    assert degraded["action"] == "alert only (broker_degraded)", degraded

    election = rows["jvm-election-recovers"]
    assert not _seen(election) & RESTART_VERDICTS and election["restarts"] == 0, election
