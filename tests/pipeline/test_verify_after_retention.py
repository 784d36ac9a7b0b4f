"""`hangwatch pipeline verify` on a topic whose oldest records retention deleted (real lab).

Covers: events deleted by retention before the read are reported as unverifiable with
their count and exit 4, never as missing (exit 1 reads as data loss); events missing
beyond what retention can explain still fail with exit 1, with the unverifiable count
alongside. The lab's brokers keep about 5 MB per partition, so ~30,000 events of
~250 bytes push the log start past offset 0.
"""

from __future__ import annotations

import json
import subprocess

from confluent_kafka import Consumer, Producer, TopicPartition

from hangwatch.contracts import ExitCode
from hangwatch_lab import Lab
from hangwatch_testing.processes import run_hangwatch

RUN = "run-retention-1"
EVENTS = 30_000


def _verify(bootstrap: str, expect: int) -> subprocess.CompletedProcess[str]:
    return run_hangwatch(
        "pipeline", "verify", "--bootstrap", bootstrap,
        "--topic", "r", "--expect", str(expect), "--run-id", RUN, "--json",
        timeout=120,
    )  # fmt: skip


def test_deleted_records_are_unverifiable_not_missing() -> None:
    with Lab(brokers=1, topics={"r": 1}) as lab:
        producer = Producer({"bootstrap.servers": lab.bootstrap, "linger.ms": 20})
        pad = "x" * 200
        for seq in range(EVENTS):
            producer.produce("r", json.dumps({"run_id": RUN, "seq": seq, "pad": pad}).encode())
            producer.poll(0)
        assert producer.flush(60) == 0
        del producer  # closed before the lab stops, so it does not log reconnects
        consumer = Consumer({"bootstrap.servers": lab.bootstrap, "group.id": "watermarks"})
        low, high = consumer.get_watermark_offsets(TopicPartition("r", 0), timeout=10)
        consumer.close()
        assert high == EVENTS and 0 < low < EVENTS  # retention deleted the oldest records

        every = _verify(lab.bootstrap, EVENTS)
        assert every.returncode == ExitCode.UNVERIFIABLE, every.stderr
        result = json.loads(every.stdout)
        assert (result["missing"], result["unverifiable"], result["lost"]) == (low, low, 0)
        assert result["deleted_records"] == low and result["truncated_partitions"] == [0]
        assert "Traceback" not in every.stderr

        beyond = _verify(lab.bootstrap, EVENTS + 5)  # 5 events the run never wrote
        assert beyond.returncode == ExitCode.DEGRADED
        assert json.loads(beyond.stdout)["lost"] == 5
