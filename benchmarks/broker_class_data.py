"""Benchmark: a 3-broker lab's start with and without the brokers' class-data archive.

Side by side in one run, alternating: `KafkaLab(brokers=3, topics={"t": 3}).start()`
(storage formatted, three broker JVMs started, every partition led) with the archive
`python -m hangwatch_lab.kafka.class_archive` built, and with it moved aside (every JVM
parses and verifies Kafka's classes itself). Measured: the start's wall time and the
machine's CPU seconds over it (/proc/stat: every JVM's and this process's work).

    python benchmarks/broker_class_data.py [--runs 3]

Progress on stderr, results on stdout.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from machine import describe, unwind_on_sigterm

from hangwatch_lab.kafka import KafkaLab
from hangwatch_lab.kafka.class_archive import build


def busy_seconds() -> float:
    """The machine's busy CPU seconds so far (user, nice, system, irq, softirq)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    return sum(fields[i] for i in (0, 1, 2, 5, 6)) / os.sysconf("SC_CLK_TCK")


@contextmanager
def archive_aside(path: Path) -> Iterator[None]:
    aside = path.with_name(path.name + ".aside")
    path.rename(aside)
    try:
        yield
    finally:
        aside.rename(path)


def one_start() -> tuple[float, float]:
    cpu, wall = busy_seconds(), time.monotonic()
    lab = KafkaLab(brokers=3, topics={"t": 3}).start()
    took = (time.monotonic() - wall, busy_seconds() - cpu)
    lab.close()
    return took


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    runs = parser.parse_args().runs
    path = build()
    results: dict[str, list[tuple[float, float]]] = {"with": [], "without": []}
    for run in range(1, runs + 1):
        print(f"run {run}/{runs}: with the archive", file=sys.stderr, flush=True)
        results["with"].append(one_start())
        print(f"run {run}/{runs}: without", file=sys.stderr, flush=True)
        with archive_aside(path):
            results["without"].append(one_start())
    print(f"machine: {describe()}; load average {os.getloadavg()}")
    for name, values in results.items():
        walls, cpus = [v[0] for v in values], [v[1] for v in values]
        print(
            f"{name} the archive: start {statistics.median(walls):.1f} s wall, "
            f"{statistics.median(cpus):.1f} CPU s (median of {runs}; "
            f"each: {', '.join(f'{w:.1f} s/{c:.1f} CPU s' for w, c in values)})"
        )
    ratio = statistics.median(c for _, c in results["with"]) / statistics.median(
        c for _, c in results["without"]
    )
    print(f"CPU with/without: {ratio:.2f}")
    return 0


if __name__ == "__main__":
    unwind_on_sigterm()
    sys.exit(main())
