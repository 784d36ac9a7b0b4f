"""Interrupting `hangwatch demo` (Ctrl-C) mid-scenario leaves nothing behind.

Covers: SIGINT while a blackhole fault is active ends the demo with one line
("interrupted", exit 130); its child processes (the lab's mock cluster, the producer
workload) are gone and the kernel rules it added are removed.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from hangwatch_lab import netfilter


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_ctrl_c_during_a_blackhole_cleans_up(kernel_faults: None) -> None:
    with subprocess.Popen(
        [sys.executable, "-m", "hangwatch", "demo", "--scenario", "s0-blackholed-cluster"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    ) as demo:
        assert demo.stderr is not None
        deadline = time.monotonic() + 60
        for line in demo.stderr:
            if "sidecar verdict cluster_unreachable" in line or time.monotonic() > deadline:
                break
        assert netfilter.drop_rule_count(demo.pid) > 0, "the fault should be active"
        children = _children(demo.pid)
        assert children, "the demo runs a mock cluster and a producer process"
        demo.send_signal(signal.SIGINT)
        rest = demo.stderr.read()
        assert demo.wait(timeout=60) == 130
    assert rest.strip().splitlines()[-1] == "hangwatch demo: interrupted"
    assert "Traceback" not in rest
    deadline = time.monotonic() + 10
    while any(_alive(c) for c in children) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [c for c in children if _alive(c)], "child processes left behind"
    assert netfilter.list_chains(demo.pid) == []
    assert os.getpid()  # the test process itself is untouched
