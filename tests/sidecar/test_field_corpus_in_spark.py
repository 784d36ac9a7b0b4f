"""The field corpus's librdkafka row, replayed inside Spark (`make test`'s librdkafka row).

librdkafka issue 5430 (`hangwatch_testing.incidents.librdkafka`): a PySpark task
on a real executor writes through a plain confluent-kafka 2.12.1 producer (its own
virtualenv, no hangwatch wrapper, no telemetry) to one Apache Kafka broker beside a
controller-only node; the controller is paused 12 s (SIGSTOP), longer than the session
timeout, so that on resuming it fences the broker (the report's leader -1). The sidecar
reads Spark's view of the executor and the executor's sockets. What the test holds
hangwatch to, whether or not the client reproduces the report (benchmarks/incidents.py
counts how often it does; docs/incidents.md has the figures):

- the fault happened (the controller paused, continued) and the sidecar saw the
  executor's task through Spark's view all along;
- reproduced (`scoring.hung`: nothing acknowledged in the watch's last 20 s, long after
  the fault): the sidecar accuses the producer after its last completed write, and a
  client started afresh (its pod restarted) writes again;
- not reproduced: the client kept writing, and hangwatch called it nothing that
  restarts it (no restart is replayed: nothing for one to fix).

Order and causality only; timings are the benchmark's.
"""

from __future__ import annotations

from hangwatch_testing.incidents.catalogue import BY_ID
from hangwatch_testing.incidents.replay import replay
from hangwatch_testing.incidents.scoring import first_flag, hung

RESTARTING = {"producer_hung", "metadata_stale"}
"""Verdicts whose default action restarts the producer's pod."""


def test_librdkafka_5430_in_a_pyspark_task() -> None:
    incident = BY_ID["librdkafka-5430"]
    result = replay(incident, restart_if=hung)
    assert result.election.get("fault") == "controller-pause", result.election
    assert result.election["fault_seconds"] >= 12.0, result.election
    spark = result.spark
    assert spark is not None and spark["available"] and spark["source"] == "driver", spark
    assert spark["tasks_total"] >= 1, spark
    if hung(result):
        assert first_flag(result) is not None, result.describe()
        assert result.restarted and result.restarted_first_ack is not None, result.describe()
        return
    assert not result.restarted, result.describe()
    assert result.acks_after > 0, result.describe()
    assert not RESTARTING & set(result.verdicts), result.describe()
