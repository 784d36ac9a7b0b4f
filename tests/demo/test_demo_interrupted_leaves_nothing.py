"""Interrupting `hangwatch demo` (Ctrl-C) mid-scenario leaves nothing behind.

Covers: SIGINT while a blackhole fault is active ends the demo with one line
("interrupted", exit 130); every process it started, directly or not (the lab's mock
cluster, the sidecars, Spark's driver JVM, the executor JVMs and their Python
workers), is gone and the kernel rules it added are removed. With `--report`, the
report of the scenario that finished before (healthy) is written and its path
printed; the interrupted scenario is listed as not finished, without a timeline.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from hangwatch_lab import netfilter
from hangwatch_testing.processes import parent_pids, running


def _descendants(pid: int) -> list[int]:
    parents = parent_pids()
    found, frontier = [], [pid]
    while frontier:
        parent = frontier.pop()
        children = [child for child, p in parents.items() if p == parent]
        found += children
        frontier += children
    return found


def test_ctrl_c_during_a_blackhole_cleans_up(kernel_faults: None, tmp_path: Path) -> None:
    report = tmp_path / "report"
    with subprocess.Popen(
        [
            sys.executable,
            "-m",
            "hangwatch",
            "demo",
            "--scenario",
            "healthy",
            "--scenario",
            "s0-blackholed-cluster",
            "--report",
            str(report),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as demo:
        assert demo.stderr is not None and demo.stdout is not None
        deadline = time.monotonic() + 260  # Spark's start-up is slow on a loaded machine
        for line in demo.stderr:
            if "sidecar verdict cluster_unreachable" in line or time.monotonic() > deadline:
                break
        assert netfilter.drop_rule_count(demo.pid) > 0, "the fault should be active"
        children = _descendants(demo.pid)
        assert len(children) >= 6, "mock cluster, 2 sidecars, driver JVM, 2 executor JVMs"
        demo.send_signal(signal.SIGINT)
        rest = demo.stderr.read()
        out = demo.stdout.read()
        assert demo.wait(timeout=120) == 130
    assert rest.strip().splitlines()[-1] == "hangwatch demo: interrupted"
    assert "Traceback" not in rest
    assert out.strip().splitlines()[-1] == f"report: {report / 'report.html'}"
    page = (report / "report.html").read_text()
    assert 'alt="timeline of healthy"' in page and "timeline of s0-" not in page
    assert "not finished, not shown: s0-blackholed-cluster" in page
    assert [p.name for p in report.glob("timeline-*.png")] == ["timeline-01-healthy.png"]
    deadline = time.monotonic() + 20
    while any(running(c) for c in children) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [c for c in children if running(c)], "child processes left behind"
    assert netfilter.list_chains(demo.pid) == []
    assert os.getpid()  # the test process itself is untouched
