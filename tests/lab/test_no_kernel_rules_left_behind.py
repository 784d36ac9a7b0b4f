"""The lab never leaves kernel rules or processes behind.

Covers: the context manager removes its chain on normal exit and when the body
raises; `hangwatch lab up` removes rules, its state file and the mock process on
SIGTERM; after `lab up` is SIGKILLed its rules stay, the orphaned mock exits by
itself, and the next lab start removes the dead lab's chain; a crashed mock
(SIGSEGV) is reported as an error, and the lab's rules are still removed.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from hangwatch.errors import LabError
from hangwatch_lab import Lab, netfilter
from hangwatch_testing.waiting import wait_for
from tests.lab.clients import connect_outcome, lab_cli, lab_command


def _pid_gone(pid: int) -> bool:
    if not netfilter.pid_alive(pid):
        return True
    # A zombie child of ours still answers kill(0): reap it if it is ours.
    try:
        return os.waitpid(pid, os.WNOHANG)[0] == pid
    except ChildProcessError:
        return False


def test_context_manager_removes_rules_even_when_the_body_raises(kernel_faults: None) -> None:
    with pytest.raises(RuntimeError), Lab(brokers=2) as lab:
        lab.blackhole(1)
        assert netfilter.drop_rule_count(os.getpid()) == 2
        raise RuntimeError("test body failed")
    assert netfilter.drop_rule_count(os.getpid()) == 0


def test_sigterm_removes_rules_state_and_mock(tmp_path: Path, kernel_faults: None) -> None:
    state = tmp_path / "lab.json"
    with lab_cli(state, "--topics", "t:3") as (proc, bootstrap):
        mock_pid = json.loads(state.read_text())["mock_pid"]
        assert lab_command(state, "fault", "blackhole", "--broker", "2").returncode == 0
        port = int(bootstrap.split(",")[1].rsplit(":", 1)[1])
        assert connect_outcome(port, 0.5) == "timeout"
        assert netfilter.drop_rule_count(proc.pid) == 2
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0
    assert netfilter.drop_rule_count(proc.pid) == 0
    assert not state.exists()
    wait_for(lambda: _pid_gone(mock_pid), 10, f"the mock (pid {mock_pid}) to exit")


def test_after_sigkill_the_next_lab_removes_the_dead_labs_rules(
    tmp_path: Path, kernel_faults: None
) -> None:
    state = tmp_path / "lab.json"
    with lab_cli(state) as (proc, _):
        mock_pid = json.loads(state.read_text())["mock_pid"]
        assert lab_command(state, "fault", "blackhole", "--broker", "1").returncode == 0
        proc.kill()
        proc.wait(timeout=10)
    assert netfilter.drop_rule_count(proc.pid) == 2, "SIGKILL cannot clean up; the next lab must"
    wait_for(lambda: _pid_gone(mock_pid), 10, "the orphaned mock to exit when its lab dies")
    with Lab(brokers=1):
        assert netfilter.list_chains(proc.pid) == []


def test_crashed_mock_is_reported_and_rules_still_removed(kernel_faults: None) -> None:
    lab = Lab(brokers=2).start()
    try:
        lab.blackhole(2)
        os.kill(lab.mock_pid, signal.SIGSEGV)
        wait_for(lambda: not lab.alive(), 10, "the lab to notice its mock is gone")
        with pytest.raises(LabError, match="exit"):
            lab.down(1)
        assert not lab.status().alive
    finally:
        lab.close()
    assert netfilter.drop_rule_count(os.getpid()) == 0


def test_lab_up_exits_nonzero_when_its_mock_dies(tmp_path: Path, kernel_faults: None) -> None:
    state = tmp_path / "lab.json"
    with lab_cli(state) as (proc, _):
        assert lab_command(state, "fault", "blackhole", "--broker", "3").returncode == 0
        os.kill(json.loads(state.read_text())["mock_pid"], signal.SIGKILL)
        assert proc.wait(timeout=20) != 0
    assert netfilter.drop_rule_count(proc.pid) == 0
