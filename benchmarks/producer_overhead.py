"""What producer telemetry costs: messages per second with telemetry on versus off, in one run.

Runs against the local fault lab (librdkafka's mock cluster, 3 brokers). Each
repetition starts a fresh lab and sends the same number of small messages through
`hangwatch_producer.producer()` twice: once with telemetry on (statistics every
1000 ms, a telemetry file refreshed at each event) and once with telemetry off
(`ProducerSettings(telemetry_enabled=False)`: no statistics, no file). The order
alternates between repetitions so drift (CPU frequency, page cache, the mock's
memory) does not favour one side. A run is timed from the first `send()` to the end
of `close()` (every message acknowledged). The medians and their ratio are printed
with the machine they were measured on; the target is a ratio of at least 0.97.

    python benchmarks/producer_overhead.py [--messages 1000000] [--repetitions 5]

A run must last several statistics intervals (1 s) or the telemetry side never
refreshes its file and the comparison measures nothing: each "on" line prints how
many refreshes happened while sending.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time

import confluent_kafka
from machine import cpu_model, unwind_on_sigterm

from hangwatch_lab import Lab
from hangwatch_pipeline import ProducerSettings, producer

TOPIC = "bench"
TARGET_RATIO = 0.97


def run_once(
    bootstrap: str, messages: int, size: int, telemetry_dir: str | None
) -> tuple[float, float, int]:
    """Seconds until every send() returned, until all were acknowledged, and refreshes seen."""
    settings = (
        ProducerSettings(telemetry_dir=telemetry_dir)
        if telemetry_dir
        else ProducerSettings(telemetry_enabled=False)
    )
    value = b"v" * size
    refreshes = 0
    with producer({"bootstrap.servers": bootstrap}, settings) as p:
        send = p.send
        started = time.perf_counter()
        for i in range(messages):
            send(TOPIC, value, key=str(i & 1023))
        sent = time.perf_counter() - started
        if p.telemetry_path is not None:
            refreshes = json.loads(p.telemetry_path.read_bytes())["seq"] - 1
    elapsed = time.perf_counter() - started
    assert p.counters().delivered == messages, p.counters()
    return sent, elapsed, refreshes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    parser.add_argument(
        "--messages",
        type=int,
        default=1_000_000,
        help="per run; enough for several statistics intervals, or telemetry never fires",
    )
    parser.add_argument("--repetitions", type=int, default=5)
    parser.add_argument("--size", type=int, default=64, help="value size in bytes")
    args = parser.parse_args(argv)
    print(
        f"machine: {os.cpu_count()} CPUs, {cpu_model()}; Python {platform.python_version()}; "
        f"confluent-kafka {confluent_kafka.__version__}, "
        f"librdkafka {confluent_kafka.libversion()[0]}"
    )
    print(
        f"workload: {args.messages:,} messages of {args.size} B per run, "
        f"{args.repetitions} repetitions, order alternating, lab with 3 brokers"
    )
    rates: dict[str, list[float]] = {"off": [], "on": []}
    send_rates: dict[str, list[float]] = {"off": [], "on": []}
    with tempfile.TemporaryDirectory(prefix="hangwatch-bench-") as telemetry_dir:
        for rep in range(1, args.repetitions + 1):
            order = ["off", "on"] if rep % 2 else ["on", "off"]
            with Lab(brokers=3, topics={TOPIC: 6}) as lab:
                for mode in order:
                    directory = telemetry_dir if mode == "on" else None
                    sent, elapsed, refreshes = run_once(
                        lab.bootstrap, args.messages, args.size, directory
                    )
                    rates[mode].append(args.messages / elapsed)
                    send_rates[mode].append(args.messages / sent)
                    extra = f", {refreshes} telemetry refreshes" if mode == "on" else ""
                    print(
                        f"  [{rep}/{args.repetitions}] telemetry {mode:<3} {elapsed:6.2f} s "
                        f"{args.messages / elapsed:>10,.0f} msg/s acknowledged "
                        f"(send() {args.messages / sent:>10,.0f}/s){extra}",
                        flush=True,
                    )
    print()
    print(f"{'':<34}{'telemetry off':>15}{'telemetry on':>15}{'ratio':>8}")
    ratio = 0.0
    for label, table in (
        ("acknowledged msg/s (median)", rates),
        ("send() calls/s (median)", send_rates),
    ):
        off, on = statistics.median(table["off"]), statistics.median(table["on"])
        ratio = ratio or on / off
        print(f"{label:<34}{off:>15,.0f}{on:>15,.0f}{on / off:>8.3f}")
    verdict = "meets" if ratio >= TARGET_RATIO else "MISSES"
    print(f"ratio on/off (acknowledged msg/s): {ratio:.3f} ({verdict} the target {TARGET_RATIO})")
    return 0


if __name__ == "__main__":
    unwind_on_sigterm()
    sys.exit(main())
