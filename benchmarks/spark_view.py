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
import os
import shutil
import socket
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from machine import describe

from hangwatch.spark_driver import DriverUi, parse_ui_url
from hangwatch_demo.spark_cluster import private_spark_home
from hangwatch_lab import Lab
from hangwatch_sidecar.loop import SidecarLoop
from hangwatch_sidecar.settings import SidecarSettings
from hangwatch_sidecar.spark.client import API, DriverClient, DriverReader
from hangwatch_sidecar.spark.tracking import SparkTracker

INTERVAL_SECONDS = SidecarSettings().spark_interval_seconds


def _say(text: str) -> None:
    print(f"\r  {text}".ljust(70), end="", file=sys.stderr, flush=True)


def _stats(values: list[float]) -> str:
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]
    return f"median {statistics.median(ordered):7.1f} ms   p95 {p95:7.1f} ms"


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


def part1(reads: int) -> tuple[list[str], DriverUi, str, str, Callable[[], None]]:
    import pyspark  # noqa: F401 - fail early with a clear error when Spark is missing
    from pyspark.sql import SparkSession

    work = Path(tempfile.mkdtemp(prefix="hangwatch-bench-spark-"))
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["SPARK_HOME"] = str(private_spark_home(work))
    _say("starting Spark local-cluster[1,2,1024]")
    spark = (
        SparkSession.builder.master("local-cluster[1,2,1024]")
        .appName("hangwatch-bench-spark-view")
        .config("spark.executor.memory", "512m")
        .config("spark.ui.port", "0")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    sc = spark.sparkContext
    sc.setLogLevel("ERROR")
    ui = parse_ui_url(sc.uiWebUrl or "")
    app = sc.applicationId
    client = DriverClient(ui, 60.0)
    executor = ""
    while not executor:
        ids = [e["id"] for e in client.get_json(f"{API}/{app}/executors") if e["id"] != "driver"]
        executor = ids[0] if ids else ""
        time.sleep(0.5)
    reader = DriverReader(DriverClient(ui, 10.0), app, executor)
    rows = _reads("steady (thread dump only)", reader, SparkTracker(5.0, executor), reads)

    def sleeper(index: int) -> int:
        import time as clock

        clock.sleep(600 if index == 0 else 0.2)
        return index

    def job() -> None:
        sc.setJobGroup("bench", "bench")
        with contextlib.suppress(Exception):  # cancelled at the end
            sc.parallelize(range(8), 8).map(sleeper).collect()

    threading.Thread(target=job, daemon=True).start()
    tracker = SparkTracker(5.0, executor)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        snap = reader.read()
        tracker.observe(snap)
        if any(tracker.seen_for(t.task_id, snap.at) >= 5 for t in snap.tasks):
            break
        time.sleep(0.5)
    rows += _reads("long task (dump + stage + median)", reader, tracker, reads)

    def stop() -> None:
        sc.cancelJobGroup("bench")
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)

    return rows, ui, app, executor, stop


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


def part2(rounds: int, ui: DriverUi, app: str, executor: str) -> list[str]:
    with Lab(brokers=3, topics={"events": 3}) as lab, tempfile.TemporaryDirectory() as tmp:
        base = SidecarSettings(
            bootstrap=lab.bootstrap,
            telemetry_dir=tmp,
            application_id=app,
            executor_id=executor,
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
                "live driver": replace(base, spark_ui_url=ui.url),
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
    rows, ui, app, executor, stop = part1(args.reads)
    try:
        rounds = part2(args.rounds, ui, app, executor)
    finally:
        stop()
    print("", file=sys.stderr)
    print(f"REST reads of a real driver (local-cluster), default interval {INTERVAL_SECONDS:g} s:")
    print("\n".join(rows))
    print(
        "sidecar evaluation rounds on the lab, side by side (a round never waits for the driver):"
    )
    print("\n".join(rounds))
    return 0


if __name__ == "__main__":
    sys.exit(main())
