"""A SIGTERM'd benchmark stops what it started (`benchmarks/machine.unwind_on_sigterm`).

Found by killing `benchmarks/false_restarts.py` mid-row: Python's default SIGTERM ended
it at once and left the row's Spark application (a Python driver and two JVMs) running.
Every benchmark's `__main__` block now installs the handler before `main`; a script
built the same way, SIGTERM'd while a `finally` guards a process it started, stops that
process and exits 143 with no traceback. The control: without the handler the process
is left behind (this test kills it).
"""

from __future__ import annotations

import ast
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
BENCHMARKS = ROOT / "benchmarks"

SCRIPT = """
import subprocess, sys, time
from pathlib import Path

sys.path.append(sys.argv[3])  # benchmarks/, for its machine module
from machine import unwind_on_sigterm

record = Path(sys.argv[1])


def main():
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    record.write_text(f"{proc.pid}\\n")
    try:
        time.sleep(600)
    finally:
        proc.kill()
        proc.wait()
        with record.open("a") as out:
            out.write("cleaned\\n")


if __name__ == "__main__":
    if sys.argv[2] == "handler":
        unwind_on_sigterm()
    sys.exit(main())
"""


def _main_block_calls(path: Path) -> list[str]:
    """The functions the `if __name__ == "__main__":` block of `path` calls, in order."""
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.If) and "__main__" in ast.unparse(node.test):
            return [ast.unparse(c.func) for c in ast.walk(node) if isinstance(c, ast.Call)]
    return []


def test_every_benchmark_installs_the_handler_before_main() -> None:
    scripts = [p for p in sorted(BENCHMARKS.glob("*.py")) if _main_block_calls(p)]
    assert len(scripts) >= 10, scripts
    for path in scripts:
        calls = _main_block_calls(path)
        assert "unwind_on_sigterm" in calls, path.name
        assert calls.index("unwind_on_sigterm") < calls.index("main"), path.name


@pytest.mark.parametrize("handler", [True, False])
def test_sigterm_stops_what_the_benchmark_started(tmp_path: Path, handler: bool) -> None:
    script, record = tmp_path / "bench.py", tmp_path / "record"
    script.write_text(textwrap.dedent(SCRIPT))
    argv = [sys.executable, str(script), str(record), "handler" if handler else "none"]
    argv.append(str(BENCHMARKS))
    errors = tmp_path / "stderr"
    with errors.open("w") as sink:  # a file: the sleeper it starts must not hold a pipe open
        run = subprocess.Popen(argv, stderr=sink)
    pid = 0
    try:
        pid = wait_for(
            lambda: int(t) if (t := record.read_text().strip() if record.exists() else "") else 0,
            30, "the benchmark to start its process",
        )  # fmt: skip
        run.send_signal(signal.SIGTERM)
        run.wait(timeout=30)
        stderr = errors.read_text()
        if handler:
            assert run.returncode == 143 and "Traceback" not in stderr, stderr
            assert record.read_text().splitlines()[-1] == "cleaned"
            assert not running(pid)
        else:  # Python's default: killed at once, the process left behind
            assert run.returncode == -signal.SIGTERM
            assert "cleaned" not in record.read_text() and running(pid)
    finally:
        run.kill()
        run.wait()
        if pid and running(pid):
            os.kill(pid, signal.SIGKILL)
