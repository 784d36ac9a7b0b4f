"""Benchmark: what the lab's real Apache Kafka engine costs, and how long its faults last.

Per run, on a fresh 3-node KRaft cluster (`Lab(engine="kafka")`, topic `t` with 3
partitions): the time from `start()` to ready (storage formatted, every broker listed
in every broker's metadata, every partition led); each broker JVM's resident memory
(VmRSS) once ready and after a produce/consume round trip; `down` then `restore` of a
broker (restarted and serving again); an `election` of 2 s by freeze and by kill, with
the measured time the topic's partitions had no serving leader (from the fault until
metadata names new leaders); `shrink --to 2`. The jar resolve is timed as it is on
this machine (a no-op when cached); `--cold` also times a resolve into an empty jar
cache and an empty Maven repository (downloads about 60 MB from Maven Central).

    python benchmarks/kafka_engine.py [--runs 3] [--cold]

Progress on stderr, results on stdout.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

from machine import describe, unwind_on_sigterm
from measuring import rss_mib

from hangwatch_lab import Lab, kafkajars
from hangwatch_lab.kafka import BROKER_HEAP, SESSION_TIMEOUT_MS, KafkaLab
from hangwatch_testing.kafka_clients import round_trip


def timed_resolve(env: dict[str, str]) -> float:
    started = time.monotonic()
    subprocess.run(
        [sys.executable, "-m", "hangwatch_lab.kafkajars"],
        env={**os.environ, **env},
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return time.monotonic() - started


def wait_elections(lab: KafkaLab) -> dict[str, Any]:
    while lab.elections_under_way():
        time.sleep(0.05)
    return lab.election_results[-1]


def one_run(run: int) -> dict[str, Any]:
    print(f"run {run}: starting a 3-node cluster", file=sys.stderr, flush=True)
    started = time.monotonic()
    with Lab(brokers=3, topics={"t": 3}, engine="kafka") as lab:
        assert isinstance(lab, KafkaLab)
        ready = time.monotonic() - started
        rss_ready = [rss_mib(pid) for pid in lab.broker_pids().values()]
        round_trip(lab.bootstrap, "t", 1000)
        rss_used = [rss_mib(pid) for pid in lab.broker_pids().values()]
        print(f"run {run}: ready in {ready:.1f} s; down/restore", file=sys.stderr, flush=True)
        t0 = time.monotonic()
        lab.down(2)
        down = time.monotonic() - t0
        t0 = time.monotonic()
        lab.restore(2)
        restore = time.monotonic() - t0
        elections = {}
        for how in ("freeze", "kill"):
            print(f"run {run}: election by {how}", file=sys.stderr, flush=True)
            t0 = time.monotonic()
            lab.election("t", 2.0, how)
            prepared = time.monotonic() - t0
            result = wait_elections(lab)
            elections[how] = {
                "prepare_seconds": round(prepared, 2),
                "leaderless_seconds": result["leaderless_seconds"],
                "fault_seconds": result["fault_seconds"],
            }
            lab.restore()
        print(f"run {run}: shrink to 2", file=sys.stderr, flush=True)
        t0 = time.monotonic()
        lab.shrink(2)
        shrink = time.monotonic() - t0
    return {
        "start_seconds": round(ready, 1),
        "rss_mib_ready": [round(r) for r in rss_ready],
        "rss_mib_after_1000_records": [round(r) for r in rss_used],
        "down_seconds": round(down, 1),
        "restore_seconds": round(restore, 1),
        "elections": elections,
        "shrink_seconds": round(shrink, 1),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--cold", action="store_true", help="also time a resolve from nothing")
    args = parser.parse_args()
    print(f"machine: {describe()}")
    print(
        f"kafka {kafkajars.default_version()}, heap -Xmx{BROKER_HEAP} per broker, "
        f"broker.session.timeout.ms={SESSION_TIMEOUT_MS}"
    )
    print(f"resolve (as cached here): {timed_resolve({}):.1f} s")
    if args.cold:
        with tempfile.TemporaryDirectory() as empty:
            env = {
                "HANGWATCH_KAFKA_CACHE": f"{empty}/cache",
                "MAVEN_OPTS": f"-Dmaven.repo.local={empty}/m2",
            }
            print(f"resolve (empty jar cache and Maven repository): {timed_resolve(env):.1f} s")
    runs = [one_run(i + 1) for i in range(args.runs)]
    for i, run in enumerate(runs, start=1):
        print(f"run {i}: {run}")

    def med(values: list[float]) -> str:
        return f"{statistics.median(values):.2f} (max {max(values):.2f})"

    print(f"start to ready, s: {med([r['start_seconds'] for r in runs])}")
    rss = [x for r in runs for x in r["rss_mib_after_1000_records"]]
    print(f"RSS per broker after 1000 records, MiB: {med(rss)}")
    for how in ("freeze", "kill"):
        leaderless = [r["elections"][how]["leaderless_seconds"] for r in runs]
        print(f"election by {how}: partitions without a serving leader, s: {med(leaderless)}")
    print(f"restore of a stopped broker, s: {med([r['restore_seconds'] for r in runs])}")
    print(f"shrink 3 -> 2, s: {med([r['shrink_seconds'] for r in runs])}")
    return 0


if __name__ == "__main__":
    unwind_on_sigterm()
    sys.exit(main())
