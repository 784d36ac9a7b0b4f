"""Records real HotSpot thread dumps (text) of real Java Kafka producers, taken the way the
sidecar takes them (`hangwatch_sidecar.spark.attach`: the attach mechanism, no driver).

Starts a 3-broker Apache Kafka lab (the `kafka` engine) and, one after the other, S4's
own client (kafka-clients 0.11.0.3, `send().get()` in its callback once the trigger file
exists) and the healthy control (kafka-clients 3.9.2, `HealthyProducer`), both from
testing/clients/incidents; once each has 200 acknowledgements, dumps it; S4 also 3 s and
5 s after its trigger. Saves `tests/sidecar/spark_fixtures/recorded_hotspot_*.txt`.

    python scripts/record_hotspot_dumps.py [--out DIR]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from hangwatch_sidecar.spark.attach import attachable, thread_dump
from hangwatch_testing.incidents.catalogue import BY_ID
from hangwatch_testing.incidents.replay import ClientProcess, started_lab
from hangwatch_testing.waiting import wait_for

OUT = Path(__file__).resolve().parents[1] / "tests" / "sidecar" / "spark_fixtures"
NAMES = {"S4": "kafka_clients_0.11.0.3_s4", "S4-control": "kafka_clients_3.9.2"}
DEADLINE_SECONDS = 5.0


def _dump(pid: int, out: Path, name: str) -> None:
    text = thread_dump(attachable(pid), time.monotonic() + DEADLINE_SECONDS)
    path = out / f"recorded_hotspot_{name}.txt"
    path.write_text(text)
    print(f"wrote {path} ({len(text)} characters)")


def _wait_acks(client: ClientProcess, incident: str) -> None:
    wait_for(lambda: len(client.acks) >= 200, 60.0, f"{incident}'s acknowledgements")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    # one lab for both clients: the Kafka S4's 0.11 client needs (3.9; 3.9.2 serves the control too)
    with started_lab(BY_ID["S4"]) as lab, tempfile.TemporaryDirectory() as tmp:
        scratch = Path(tmp)
        trigger = scratch / "sync-send-in-callback"
        for incident, name in NAMES.items():
            client = ClientProcess(
                BY_ID[incident].command(lab.bootstrap, scratch), scratch / f"{name}.log"
            )
            try:
                _wait_acks(client, incident)
                _dump(client.proc.pid, args.out, f"{name}_healthy")
                if incident == "S4":
                    trigger.touch()
                    for n, pause in ((1, 3.0), (2, 2.0)):
                        time.sleep(pause)
                        _dump(client.proc.pid, args.out, f"{name}_hung_{n}")
                    trigger.unlink()
            finally:
                client.stop()


if __name__ == "__main__":
    main()
