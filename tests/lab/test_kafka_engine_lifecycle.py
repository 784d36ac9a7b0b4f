"""The real Kafka engine leaves nothing behind, and fails cleanly when it cannot start.

Covers: `hangwatch lab up --engine kafka` stays up while a fault stops brokers on
purpose (shrink), and stopped with SIGTERM takes every broker JVM (a frozen one too),
kernel rule, state file and data directory with it; SIGKILLed, its brokers die with
it (parent-death signal) and the next lab removes its data directory; Ctrl-C while the
cluster is still starting stops what had started. Each environment failure is one line
naming the step, exit 3, with no JVM left: no Java (JAVA_HOME without bin/java), jars
that cannot be resolved (Maven Central unreachable), a port in use, brokers not ready
in time.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from hangwatch.errors import LabSetupError
from hangwatch_lab import Lab, netfilter
from hangwatch_lab.kafka import DATA_PREFIX, nodes, remove_stale_data_dirs, run_state
from hangwatch_testing.kafka_clients import processes_with
from hangwatch_testing.waiting import wait_for
from tests.lab.clients import connect_outcome, lab_cli, lab_command

pytestmark = pytest.mark.xdist_group("kafka-engine")


def _marker(lab_pid: int) -> str:
    """What every file and JVM of the lab run by process `lab_pid` has in its path."""
    return f"{DATA_PREFIX}{lab_pid}-"


def _data_dirs(lab_pid: int) -> list[Path]:
    return list(Path(tempfile.gettempdir()).glob(f"{_marker(lab_pid)}*"))


def _lab_up(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "hangwatch",
            "lab",
            "--state",
            str(tmp_path / "lab.json"),
            "up",
            "--engine",
            "kafka",
            *args,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
    )


def _fails_cleanly(proc: subprocess.Popen[str], step: str) -> str:
    """Waits for the failed `lab up`; checks exit 3, one error line naming `step`, no JVM,
    no data directory, no kernel rule; returns the error line."""
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 3, err
    assert "Traceback" not in err
    last = err.strip().splitlines()[-1]
    assert last.startswith("hangwatch lab: error: ") and step in last, last
    assert processes_with(_marker(proc.pid)) == []
    assert _data_dirs(proc.pid) == []
    assert netfilter.available() is not None or netfilter.list_chains(proc.pid) == []
    return last


def test_sigterm_stops_every_jvm_rule_state_and_data_dir(
    tmp_path: Path, kernel_faults: None
) -> None:
    state = tmp_path / "lab.json"
    with lab_cli(state, "--engine", "kafka", "--topics", "t:1") as (proc, bootstrap):
        status = json.loads(lab_command(state, "status", "--json").stdout)
        assert status["engine"] == "kafka" and status["alive"]
        pids = [b["pid"] for b in status["brokers"]]
        assert sorted(processes_with(_marker(proc.pid))) == sorted(pids)
        shrink = lab_command(state, "fault", "shrink", "--to", "2", "--dead", "frozen")
        assert shrink.returncode == 0, shrink.stderr
        status = json.loads(lab_command(state, "status", "--json").stdout)
        assert status["alive"], "a broker the lab stopped on purpose is not a crash"
        assert status["brokers"][2]["condition"] == "removed+frozen"
        assert run_state(pids[2]) == "T"
        assert lab_command(state, "fault", "blackhole", "--broker", "2").returncode == 0
        assert connect_outcome(int(bootstrap.split(",")[1].rsplit(":", 1)[1]), 0.5) == "timeout"
        assert netfilter.drop_rule_count(proc.pid) == 2
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
    assert processes_with(_marker(proc.pid)) == []
    assert netfilter.drop_rule_count(proc.pid) == 0
    assert not state.exists()
    assert _data_dirs(proc.pid) == []


def test_a_sigkilled_lab_takes_its_brokers_along_and_the_next_removes_its_data(
    tmp_path: Path,
) -> None:
    with lab_cli(tmp_path / "lab.json", "--engine", "kafka") as (proc, _):
        assert len(processes_with(_marker(proc.pid))) == 3
        proc.kill()
        proc.wait(timeout=10)
    wait_for(
        lambda: processes_with(_marker(proc.pid)) == [],
        30,
        "the killed lab's JVMs to exit",
        interval=0.1,
    )
    assert _data_dirs(proc.pid), "SIGKILL cannot clean up; the next lab must"
    remove_stale_data_dirs()  # what the next kafka lab's start does first
    assert _data_dirs(proc.pid) == []


def test_ctrl_c_while_starting_stops_what_had_started(tmp_path: Path) -> None:
    proc = _lab_up(tmp_path)
    # a broker, not the storage formatter
    broker_jvm = f"kafka.Kafka {tempfile.gettempdir()}/{_marker(proc.pid)}"
    wait_for(lambda: processes_with(broker_jvm), 120, "a broker JVM", interval=0.1)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert processes_with(_marker(proc.pid)) == []
    assert _data_dirs(proc.pid) == []


def test_no_java_is_one_line_exit_3(tmp_path: Path) -> None:
    line = _fails_cleanly(
        _lab_up(tmp_path, env={"JAVA_HOME": str(tmp_path / "no-jdk")}), "starting the Kafka engine"
    )
    assert "JAVA_HOME" in line


def test_unresolvable_jars_are_one_line_exit_3(tmp_path: Path) -> None:
    """Maven Central unreachable: an empty jar cache and Maven repository, and a proxy that
    refuses every connection."""
    env = {
        "HANGWATCH_KAFKA_CACHE": str(tmp_path / "kafka-cache"),
        "MAVEN_OPTS": f"-Dmaven.repo.local={tmp_path / 'm2'} -Dhttps.proxyHost=127.0.0.1 "
        "-Dhttps.proxyPort=9 -Dhttp.proxyHost=127.0.0.1 -Dhttp.proxyPort=9",
    }
    line = _fails_cleanly(_lab_up(tmp_path, env=env), "resolving Kafka")
    assert "Maven Central" in line
    assert not list((tmp_path / "kafka-cache").glob("*/lib"))


def test_brokers_not_ready_in_time_are_one_line_exit_3(tmp_path: Path) -> None:
    line = _fails_cleanly(
        _lab_up(tmp_path, "--ready-timeout", "0.5"), "starting the cluster: brokers [1, 2, 3]"
    )
    assert "not ready within" in line


def test_a_picked_port_taken_before_its_broker_binds_starts_again_on_new_ports(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The race CI met ("broker 1 exited (code 1): Address already in use"): another
    process bound a port between the lab's pick and its broker's bind. Here the first
    pick hands out a port a squatter listens on; the lab starts again on new ports."""
    picks: list[list[int]] = []
    real = nodes.free_ports

    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        taken = squatter.getsockname()[1]

        def racing(count: int) -> list[int]:
            ports = real(count)
            picks.append([taken, *ports[1:]] if not picks else ports)
            return picks[-1]

        monkeypatch.setattr(nodes, "free_ports", racing)
        with Lab(brokers=1, engine="kafka") as lab:
            assert len(picks) == 2 and picks[0][0] == taken
            assert lab.bootstrap == f"127.0.0.1:{picks[1][0]}" != f"127.0.0.1:{taken}"
    assert processes_with(_marker(os.getpid())) == []
    assert _data_dirs(os.getpid()) == []


def test_a_port_in_use_is_refused_before_any_jvm_starts() -> None:
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        port = squatter.getsockname()[1]
        with pytest.raises(LabSetupError, match=f"starting broker 1: port 127.0.0.1:{port} is in"):
            Lab(brokers=1, engine="kafka", ports=[port]).start()
    assert LabSetupError.exit_code == 3
    assert processes_with(_marker(os.getpid())) == []
    assert _data_dirs(os.getpid()) == []
