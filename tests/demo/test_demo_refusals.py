"""`hangwatch demo`'s refusal rows: writes the cluster refuses are named, never restarted.

Covers, with the real command (subprocess, `--json`) on `local-cluster` executors writing
to a fresh 3-broker Apache Kafka lab each, one real sidecar per executor and the
operator's own code deciding with the demo's policy, mid-run the topic's
`max.message.bytes` lowered to 200, below every record the pipeline writes, so that
every write is refused `MSG_SIZE_TOO_LARGE` while every broker answers:

- `wrapper-message-too-large`: the tasks write through the wrapper (telemetry);
- `plain-message-too-large`: the tasks write through a plain confluent-kafka producer (no
  telemetry): the sidecars read the error from Spark's record of the failed attempt;

in each the sidecars say writes_rejected, naming the error -> the operator alerts,
naming it, and restarts nothing (a new executor would be refused the same way); no
sidecar ever says producer_hung or metadata_stale; once the limit is lifted Spark's
retried tasks write every event (0 lost), exit code 0, no kernel rule left behind.

And issue 43's ISR case, in the same run: `isr-broker-down`, the tasks writing through
the wrapper (acks=all) to a topic whose min.insync.replicas is 3 of its 3 replicas, then
broker 3 stopped: the sidecars say partitions_unwritable naming the ISR against
min.insync.replicas -> the operator alerts once for the topic, and restarts nothing; no
sidecar says producer_hung or metadata_stale; once the broker is back every event is
written (0 lost).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.demo.running import RESTART_VERDICTS, run_demo, verdicts_seen

ROWS = {"wrapper-message-too-large": "wrapper", "plain-message-too-large": "plain"}
ISR = "isr-broker-down"


@pytest.mark.timeout(900)
def test_a_record_over_the_topics_limit_is_named_and_never_restarted(
    kernel_faults: None, tmp_path: Path
) -> None:
    rows, _ = run_demo(*ROWS, ISR, keep=tmp_path, timeout_seconds=840)
    for name, producer in ROWS.items():
        row = rows[name]
        assert row["engine"] == "kafka" and row["producer"] == producer, row
        assert row["verdict"] == "writes_rejected" and row["detect_seconds"] is not None, row
        assert row["restarts"] == 0 and row["restart_seconds"] is None, row
        assert row["action"] == "alert only (writes_rejected: MSG_SIZE_TOO_LARGE)", row
        assert not verdicts_seen(row) & RESTART_VERDICTS, row["changes"]
        assert any(
            "MSG_SIZE_TOO_LARGE" in r and "a restart cannot help" in r for r in row["reasons"]
        ), row["reasons"]
        # the limit lifted, the failed tasks ran again: events flowed, every one was written
        assert row["progress_again_seconds"] is not None and row["task_retries"] >= 1, row
        assert row["ok"] and row["lost"] == 0 and row["events"] > 100, row
    # without telemetry, the error came from Spark's record of the failed attempt
    assert any(r.startswith("spark view: ") and "MSG_SIZE_TOO_LARGE" in r
               for r in rows["plain-message-too-large"]["reasons"])  # fmt: skip
    # issue 43's ISR case: the cluster's refusal, said once for the topic, never restarted
    row = rows[ISR]
    assert row["engine"] == "kafka" and row["producer"] == "wrapper", row
    assert row["verdict"] == "partitions_unwritable" and row["detect_seconds"] is not None, row
    assert row["restarts"] == 0 and row["restart_seconds"] is None, row
    assert row["action"] == "alert only (partitions_unwritable: topic events)", row
    assert not verdicts_seen(row) & RESTART_VERDICTS, row["changes"]
    assert any(
        "ISR 2 of 3" in r and "min.insync.replicas 3" in r and "broker 3" in r
        for r in row["reasons"]
    ), row["reasons"]
    assert row["progress_again_seconds"] is not None, row
    assert row["ok"] and row["lost"] == 0 and row["events"] > 100, row
