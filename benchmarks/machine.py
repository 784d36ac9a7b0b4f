"""What every benchmark prints first: the machine its figures were measured on.

Benchmarks run as scripts (`python benchmarks/NAME.py`), so this sibling module is
importable as `machine`.
"""

from __future__ import annotations

import os
import platform
from pathlib import Path


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo (or what `platform` knows)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def describe() -> str:
    """`N CPUs, model; Python x.y.z`."""
    return f"{os.cpu_count()} CPUs, {cpu_model()}; Python {platform.python_version()}"
