"""What the benchmarks measure with: a sample's percentile, a process's resident memory.

One definition for every benchmark, so that a p99 or an RSS means the same in each of
their figures. Benchmarks run as scripts (`python benchmarks/NAME.py`), so this sibling
module is importable as `measuring`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

__all__ = ["percentile", "rss_mib"]


def percentile(values: Sequence[float], share: float) -> float:
    """The value at `share` (0 to 1) of `values` in order, by nearest rank: the sample at
    index `round(share * (n - 1))` (the p99 of 20 values is the largest, of 200 the
    198th). `values` must not be empty."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def rss_mib(pid: int) -> float:
    """Process `pid`'s resident memory (VmRSS) in MiB. A process without one (a zombie, a
    kernel thread) raises RuntimeError: a figure of 0 would read as a measurement."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"process {pid} has no VmRSS")
