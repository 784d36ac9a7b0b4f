"""A SIGTERM'd pytest run still tears its fixtures down (tests/conftest.py's handler).

A small pytest run in a subprocess: its fixture starts a process (a sleeping Python)
and writes its pid; the test writes that it is running and waits. This test sends
SIGTERM mid-test, as a CI timeout or a developer's `kill` does, and checks the run
ended as interrupted, the fixture's teardown ran and the process it started is gone:
in the pytest process itself, and in an xdist worker (the whole process group
signalled, as a job's timeout does). The control: the same run without the suite's
hook leaves the fixture's process behind (this test kills it).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from hangwatch_testing.processes import running
from hangwatch_testing.waiting import wait_for

ROOT = Path(__file__).resolve().parents[1]

TEST = """
import os, subprocess, sys, time
from pathlib import Path

import pytest

RECORD = Path(os.environ["SIGTERM_RECORD"])


def note(line):
    with RECORD.open("a") as out:
        out.write(line + "\\n")


@pytest.fixture
def sleeper():
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    note(f"started {proc.pid}")
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait()
        note("cleaned")


def test_waits(sleeper):
    note("running")
    time.sleep(600)
"""


def _run(tmp_path: Path, hook: bool, workers: int) -> tuple[subprocess.CompletedProcess[str], int]:
    """Run the small suite, SIGTERM it once its test runs; (the run, the sleeper's pid)."""
    (tmp_path / "test_killed.py").write_text(textwrap.dedent(TEST))
    conftest = "from tests.conftest import pytest_configure  # noqa: F401\n" if hook else ""
    (tmp_path / "conftest.py").write_text(conftest)
    record = tmp_path / "record"
    record.touch()
    env = {**os.environ, "SIGTERM_RECORD": str(record)}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", "."]
    argv += ["-n", str(workers)] if workers else []
    run = subprocess.Popen(
        argv,
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        wait_for(
            lambda: "running" in record.read_text().split(),
            120,
            "the small run's test to start",
            give_up=lambda: run.poll() is not None,
            context=record.read_text,
        )
        pid = int(record.read_text().split()[1])
        if workers:
            os.killpg(run.pid, signal.SIGTERM)  # the whole group, as a job's timeout
        else:
            os.kill(run.pid, signal.SIGTERM)
        out, _ = run.communicate(timeout=120)
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
            run.wait()
    done = subprocess.CompletedProcess(argv, run.returncode, out + record.read_text(), "")
    return done, pid


@pytest.mark.parametrize("workers", [0, 1], ids=["pytest", "xdist-worker"])
def test_sigterm_mid_test_runs_the_fixtures_teardown(tmp_path: Path, workers: int) -> None:
    run, pid = _run(tmp_path, hook=True, workers=workers)
    assert run.returncode == pytest.ExitCode.INTERRUPTED, run.stdout
    assert run.stdout.rstrip().endswith("cleaned"), run.stdout
    assert "Terminated: signal 15 (SIGTERM)" in run.stdout, run.stdout
    assert not running(pid), f"the fixture's process {pid} outlived the run"


def test_without_the_hook_the_fixtures_process_is_left_behind(tmp_path: Path) -> None:
    run, pid = _run(tmp_path, hook=False, workers=0)
    try:
        assert run.returncode == -signal.SIGTERM, run.stdout
        assert "cleaned" not in run.stdout
        assert running(pid)
    finally:
        if running(pid):
            os.kill(pid, signal.SIGKILL)
