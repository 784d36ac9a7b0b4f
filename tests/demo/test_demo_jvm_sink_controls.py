"""Silence is not a hang for Spark's own Kafka sink (the connector's JVM `KafkaProducer`).

Covers, with the real `hangwatch demo` command (subprocess, `--json`) on `local-cluster`
executors writing with `spark-sql-kafka-0-10` to the real Apache Kafka lab engine (the
Java client cannot talk to librdkafka's mock cluster), one real sidecar per executor
(socket view narrowed to that executor's process tree, Spark's view with the JVM thread
dump, the Python stack view), under the demo's fast settings (stall threshold 5 s):

- `jvm-computes-between-writes`: `df.write.format("kafka")` whose rows come from a Python
  step that computes for three stall thresholds after every 300 events;
- `jvm-waits-on-input`: the same step blocked on slow input instead;
- `jvm-long-linger`: `kafka.linger.ms=4000` with a batch size the rows never fill;
- `jvm-streaming-idle`: `writeStream.format("kafka")` with a 15 s processing-time trigger,
  the query idle between its micro-batches (its producer cached and connected);

none ever gets a restart verdict nor a restart, and nothing is lost. In the first two the
executor's connections are silent past the threshold while its task runs (the socket
view's silence), and Spark's view - the executor JVM's thread dump: the producer's
threads in their own loop, no task thread inside the client - is among what cleared it
(`/status` `latest.evidence.silence_cleared`; the Python stack view, which sees the step
computing or waiting outside any client, clears it as well).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from hangwatch_demo.scenarios import Timing
from tests.demo.running import assert_never_restarted, run_demo

PAUSING = ("jvm-computes-between-writes", "jvm-waits-on-input")
LINGER_AND_STREAMING = ("jvm-long-linger", "jvm-streaming-idle")
"""The controls in two demo runs of two scenarios each (one run of the four took 6 min 45 s
in a loaded warm run: no test of the suite runs that long)."""


@pytest.mark.timeout(900)
@pytest.mark.parametrize(
    "controls", [PAUSING, LINGER_AND_STREAMING], ids=["pausing", "linger-and-streaming"]
)
def test_spark_kafka_sink_tasks_that_pause_are_never_restarted(
    controls: tuple[str, ...], kernel_faults: None, tmp_path: Path
) -> None:
    rows, _ = run_demo(*controls, keep=tmp_path, timeout_seconds=840)
    for name, row in rows.items():
        assert row["producer"] == "jvm", row
        assert_never_restarted(name, row)
    for name in set(controls) & set(PAUSING):
        # silent past the threshold while the task ran upstream of the sink, and cleared
        row = rows[name]
        assert (row["longest_silence_seconds"] or 0) >= Timing().stall_seconds, row
        # Spark's view (the executor's JVM thread dump) clears it: the producer's threads in
        # their own loop, no task thread inside the client (the Python step may clear it too)
        sources = {reason.split(":", 1)[0] for reason in row["silence_cleared"]}
        assert "spark view" in sources, row
