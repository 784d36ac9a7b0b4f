"""Spark view benchmark: what reading a real driver costs, and what a dead one costs a round.

Part 1 starts a `local-cluster[1,2,1024]` application (executor in its own JVM) and
reads its REST API as the sidecar does, many times: the steady-state read (one thread
dump of the executor) and the read while a task runs past half the stall threshold
(thread dump + the stage's counts + its finished tasks' median): milliseconds per read
(median, 95th percentile), requests and bytes per read, and the driver's request rate
for 1,000 executors at the default interval.

Part 2 runs the sidecar's own evaluation loop (`SidecarLoop.round`) on the lab, side by
side in one run: Spark view off, Spark view reading the live driver, the driver's UI
port closed (refused), and a driver that accepts and never answers (3 s deadline):
round time median and maximum. A round never waits for the driver, so all four must
stay within the same few milliseconds. Prints the machine first.

    python benchmarks/spark_view.py [--reads 40] [--rounds 30]
"""

from __future__ import annotations

import argparse
import contextlib
import socket
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import replace
from pathlib import Path

from machine import describe, unwind_on_sigterm
from measuring import percentile

from hangwatch_lab import Lab
from hangwatch_sidecar.loop import SidecarLoop
from hangwatch_sidecar.settings import SidecarSettings
from hangwatch_sidecar.spark.client import DriverClient, DriverReader
from hangwatch_sidecar.spark.tracking import SparkTracker
from hangwatch_testing.spark_driver import Driver, local_cluster_driver

INTERVAL_SECONDS = SidecarSettings().spark_interval_seconds


def _say(text: str) -> None:
    print(f"\r  {text}".ljust(70), end="", file=sys.stderr, flush=True)


def _stats(values: list[float]) -> str:
    p95 = percentile(values, 0.95)
    return f"median {statistics.median(values):7.1f} ms   p95 {p95:7.1f} ms"


def _reads(label: str, reader: DriverReader, tracker: SparkTracker, n: int) -> list[str]:
    millis, requests, sizes = [], [], []
    for i in range(1, n + 1):
        _say(f"{label}: read {i}/{n}")
        client = reader.client
        before = (client.requests, client.response_bytes)
        started = time.perf_counter()
        snapshot = reader.read()
        due = [t for t in snapshot.tasks if tracker.seen_for(t.task_id, snapshot.at) >= 2.5]
        if due:
            reader.read_peers(due)
        tracker.observe(snapshot)
        millis.append((time.perf_counter() - started) * 1000)
        requests.append(client.requests - before[0])
        sizes.append(client.response_bytes - before[1])
        time.sleep(0.2)
    per_read = statistics.median(requests)
    rate = 1000 * per_read / INTERVAL_SECONDS
    return [
        f"{label:34} {_stats(millis)}   {per_read:.0f} requests  "
        f"{statistics.median(sizes) / 1024:6.1f} KiB   1,000 executors: {rate:.0f} req/s"
    ]


def part1(driver: Driver, reads: int) -> list[str]:
    sc = driver.spark.sparkContext
    reader = DriverReader(DriverClient(driver.ui, 10.0), driver.application_id, driver.executor_id)
    rows = _reads("steady (thread dump only)", reader, SparkTracker(5.0, driver.executor_id), reads)

    def sleeper(index: int) -> int:
        import time as clock

        clock.sleep(600 if index == 0 else 0.2)
        return index

    def job() -> None:
        sc.setJobGroup("bench", "bench")
        with contextlib.suppress(Exception):  # cancelled at the end
            sc.parallelize(range(8), 8).map(sleeper).collect()

    threading.Thread(target=job, daemon=True).start()
    tracker = SparkTracker(5.0, driver.executor_id)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        snap = reader.read()
        tracker.observe(snap)
        if any(tracker.seen_for(t.task_id, snap.at) >= 5 for t in snap.tasks):
            break
        time.sleep(0.5)
    try:
        rows += _reads("long task (dump + stage + median)", reader, tracker, reads)
    finally:
        sc.cancelJobGroup("bench")
    return rows


def _round_times(label: str, settings: SidecarSettings, rounds: int) -> str:
    loop = SidecarLoop(settings, identity={"pod": "bench"})
    times = []
    try:
        for i in range(1, rounds + 1):
            _say(f"rounds, {label}: {i}/{rounds}")
            state = loop.round()
            times.append(state.round_seconds * 1000)
            time.sleep(0.3)
        spark = loop.state().spark
        status = "off" if spark is None else ("available" if spark.available else spark.error)
    finally:
        loop.close()
    return f"{label:34} {_stats(times)}   max {max(times):7.1f} ms   view: {status}"[:160]


def part2(rounds: int, driver: Driver) -> list[str]:
    with Lab(brokers=3, topics={"events": 3}) as lab, tempfile.TemporaryDirectory() as tmp:
        print(f"lab engine: {lab.engine_description}")
        base = SidecarSettings(
            bootstrap=lab.bootstrap,
            telemetry_dir=tmp,
            application_id=driver.application_id,
            executor_id=driver.executor_id,
            spark_interval_seconds=0.5,
            spark_timeout_ms=3000,
        )
        with socket.socket() as closed, socket.socket() as wedged:
            closed.bind(("127.0.0.1", 0))  # bound, never listening: connections refused
            wedged.bind(("127.0.0.1", 0))
            wedged.listen(256)  # accepts into the backlog, never answers
            refused = f"http://127.0.0.1:{closed.getsockname()[1]}"
            hanging = f"http://127.0.0.1:{wedged.getsockname()[1]}"
            cases = {
                "Spark view off": base,
                "live driver": replace(base, spark_ui_url=driver.ui.url),
                "driver UI refused": replace(base, spark_ui_url=refused),
                "driver wedged (3 s deadline)": replace(base, spark_ui_url=hanging),
            }
            return [_round_times(label, s, rounds) for label, s in cases.items()]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reads", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=30)
    args = parser.parse_args()
    print(f"machine: {describe()}")
    _say("starting Spark local-cluster[1,2,1024]")
    with (
        tempfile.TemporaryDirectory(prefix="hangwatch-bench-spark-") as work,
        local_cluster_driver(Path(work), "hangwatch-bench-spark-view") as driver,
    ):
        rows = part1(driver, args.reads)
        rounds = part2(args.rounds, driver)
    print("", file=sys.stderr)
    print(f"REST reads of a real driver (local-cluster), default interval {INTERVAL_SECONDS:g} s:")
    print("\n".join(rows))
    print(
        "sidecar evaluation rounds on the lab, side by side (a round never waits for the driver):"
    )
    print("\n".join(rounds))
    return 0


if __name__ == "__main__":
    unwind_on_sigterm()
    sys.exit(main())
